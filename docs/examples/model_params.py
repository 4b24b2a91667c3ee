"""The whole 124M GPTModel: its parameter count with a separate and with a tied output head.

Builds the full model (163M float64 numbers, about 1.3 GB): takes a few seconds.
"""

from npgpt import GPT_CONFIG_124M, GPTModel


def main():
    model = GPTModel(GPT_CONFIG_124M, rng=0)
    total = sum(p.data.size for p in model.parameters())
    head = model.out_head.weight.data.size
    print(f"{'total parameters:':<36} {total:>11,}")
    print(f"{'output head (50257 x 768):':<36} {head:>11,}")
    print(f"{'total without the output head:':<36} {total - head:>11,}")
    model.out_head.weight = model.tok_emb.weight  # tie: one Parameter, counted once
    tied = sum(p.data.size for p in model.parameters())
    print(f"{'total with the head tied to tok_emb:':<36} {tied:>11,}")
    return {"total": total, "head": head, "tied": tied}


if __name__ == "__main__":
    main()
