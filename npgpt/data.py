"""Training data: the embedded Shakespeare corpus, a character tokenizer, the 90/10 split and
seeded random batches, as in nanoGPT's `shakespeare_char`.

The default corpus ships in the package, gzip-compressed: `npgpt/data/tinyshakespeare.txt.gz`
(1,115,394 characters of Shakespeare, the `input.txt` of char-rnn and nanoGPT). Any UTF-8 text
file can take its place (`npgpt train --data PATH`).
"""

import gzip
import zlib
from importlib import resources
from pathlib import Path

import numpy as np

from .errors import DataError

CORPUS_RESOURCE = "data/tinyshakespeare.txt.gz"


def load_corpus(path=None):
    """The text of `path` (UTF-8; `.gz` is decompressed), or the embedded corpus when None.

    A path that is missing, a directory, unreadable, not gzip (for `.gz`), not UTF-8, binary
    (NUL bytes) or empty is a DataError naming the file."""
    if path is None:
        raw = resources.files("npgpt").joinpath(CORPUS_RESOURCE).read_bytes()
        return gzip.decompress(raw).decode("utf-8")
    path = Path(path)
    if path.is_dir():
        raise DataError(f"load_corpus: {path} is a directory, not a text file")
    if not path.is_file():
        raise DataError(f"load_corpus: no such file: {path}")
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise DataError(f"load_corpus: {path} cannot be read ({getattr(e, 'strerror', None) or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(
            f"load_corpus: {path} is not UTF-8 text (byte {e.start}: {raw[e.start : e.start + 1]!r})"
        ) from None
    if "\x00" in text:
        raise DataError(f"load_corpus: {path} is binary, not text (NUL byte at {text.index(chr(0))})")
    if not text:
        raise DataError(f"load_corpus: {path} is empty")
    return text


class CharTokenizer:
    """One id per distinct character, in sorted order (nanoGPT's `stoi` / `itos`)."""

    def __init__(self, chars):
        chars = list(chars)
        if not chars or len(set(chars)) != len(chars) or any(len(c) != 1 for c in chars):
            raise ValueError("CharTokenizer: chars must be distinct single characters, at least one")
        self.chars = chars
        self.stoi = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_text(cls, text):
        if not text:
            raise ValueError("CharTokenizer.from_text: the text is empty")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self):
        return len(self.chars)

    def encode(self, text):
        """str -> list of ids; a character the corpus never had is an error naming it."""
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise ValueError(
                f"CharTokenizer.encode: characters not in the vocabulary ({self.vocab_size} chars): "
                f"{''.join(unknown)!r}"
            )
        return [self.stoi[c] for c in text]

    def decode(self, ids):
        """iterable of ids -> str."""
        return "".join(self.chars[int(i)] for i in ids)

    def to_dict(self):
        """A JSON-ready description, saved with every checkpoint."""
        return {"type": "char", "chars": "".join(self.chars)}

    @classmethod
    def from_dict(cls, d):
        if d.get("type") != "char":
            raise ValueError(f"CharTokenizer.from_dict: expected type 'char', got {d.get('type')!r}")
        return cls(d["chars"])


def train_val_split(ids, train_frac=0.9):
    """ids: (N,) -> (train, val): the first `train_frac` of the tokens, then the rest."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"train_val_split: ids must be 1-D, got shape {ids.shape}")
    if not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_val_split: train_frac must be in (0, 1), got {train_frac}")
    n = int(train_frac * len(ids))
    return ids[:n], ids[n:]


def get_batch(data, block_size, batch_size, rng):
    """Random windows of `data` (N,): inputs x (B, T) and targets y = x shifted by one (B, T).

    `rng` is an np.random.Generator; the same state gives the same batch.
    """
    data = np.asarray(data)
    if len(data) < block_size + 1:
        raise ValueError(
            f"get_batch: data has {len(data)} tokens, fewer than block_size + 1 = {block_size + 1}; "
            "use a smaller --block-size or a longer corpus"
        )
    ix = rng.integers(0, len(data) - block_size, size=batch_size)  # (B,)
    offsets = ix[:, None] + np.arange(block_size)  # (B, T)
    x = data[offsets].astype(np.int64)  # (B, T)
    y = data[offsets + 1].astype(np.int64)  # (B, T)
    return x, y


def prepare(path=None, tokenizer=None, train_frac=0.9):
    """-> (tokenizer, train ids, val ids) for the corpus at `path` (None: the embedded one). The
    tokenizer is built from the text unless given (as a CharTokenizer or its to_dict())."""
    text = load_corpus(path)
    if tokenizer is None:
        tokenizer = CharTokenizer.from_text(text)
    elif isinstance(tokenizer, dict):
        tokenizer = CharTokenizer.from_dict(tokenizer)
    try:
        ids = np.array(tokenizer.encode(text), dtype=np.int64)  # (N,)
    except ValueError as e:  # resuming on another corpus: characters the checkpoint never saw
        raise DataError(f"prepare: {path or 'the embedded corpus'}: {e}") from None
    return (tokenizer, *train_val_split(ids, train_frac))
