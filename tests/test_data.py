"""Data: the embedded corpus is the published file, the char tokenizer, the split, the batches."""

import gzip
import hashlib
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npgpt.data import CharTokenizer, get_batch, load_corpus, train_val_split
from npgpt.errors import DataError
from tests.asserts import assert_equal
from tests.strategies import seeds

# from ../shared/data/README.md: tinyshakespeare.txt, 1,115,394 bytes
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
NBYTES = 1_115_394


def test_embedded_corpus_is_tinyshakespeare():
    text = load_corpus()
    raw = text.encode("utf-8")
    assert len(raw) == NBYTES, f"embedded corpus has {len(raw)} bytes, expected {NBYTES}"
    assert hashlib.sha256(raw).hexdigest() == SHA256, "embedded corpus sha256 differs from the published one"
    tok = CharTokenizer.from_text(text)
    assert tok.vocab_size == 65, f"tinyshakespeare has 65 distinct characters, got {tok.vocab_size}"


def test_load_text_and_gz_files(tmp_path):
    text = "To be, or not to be: that is the question.\n\u00e6"
    (tmp_path / "a.txt").write_text(text, encoding="utf-8")
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    assert load_corpus(tmp_path / "a.txt") == text
    assert load_corpus(tmp_path / "a.txt.gz") == text
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00 not utf-8")
    with pytest.raises(ValueError, match=r"load_corpus: .*bad.txt is not UTF-8"):
        load_corpus(tmp_path / "bad.txt")
    with pytest.raises(DataError, match="load_corpus: no such file"):
        load_corpus(tmp_path / "missing.txt")


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("dir", None, r"dir is a directory, not a text file"),
        ("nul.txt", b"ab\x00cd", r"nul.txt is binary, not text \(NUL byte at 2\)"),
        ("elf.bin", b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), r"elf.bin is not UTF-8 text"),
        ("empty.txt", b"", r"empty.txt is empty"),
        ("fake.txt.gz", b"not gzip at all", r"fake.txt.gz cannot be read"),
        ("cut.txt.gz", gzip.compress(b"hello world" * 50)[:20], r"cut.txt.gz cannot be read"),
    ],
)
def test_unusable_corpus_files_are_data_errors_naming_the_file(tmp_path, name, content, pattern):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(DataError, match=pattern):
        load_corpus(path)


@given(text=st.text(min_size=1, max_size=200))
def test_char_tokenizer_round_trip(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert tok.chars == sorted(set(text)), "vocabulary is not the sorted distinct characters"
    assert all(0 <= i < tok.vocab_size for i in ids)
    again = CharTokenizer.from_dict(json.loads(json.dumps(tok.to_dict())))
    assert again.encode(text) == ids, "tokenizer changed through its JSON form"


def test_char_tokenizer_ids_by_hand():
    tok = CharTokenizer.from_text("hello")
    assert tok.chars == ["e", "h", "l", "o"]
    assert tok.encode("hole") == [1, 3, 2, 0]
    with pytest.raises(ValueError, match=r"CharTokenizer.encode: characters not in the vocabulary.*'axz'"):
        tok.encode("zax")
    with pytest.raises(ValueError, match="CharTokenizer: chars must be distinct"):
        CharTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="CharTokenizer.from_text: the text is empty"):
        CharTokenizer.from_text("")


@given(n=st.integers(2, 500))
def test_train_val_split(n):
    ids = np.arange(n)
    train, val = train_val_split(ids)
    assert len(train) == int(0.9 * n), f"train has {len(train)} of {n} tokens"
    assert_equal("train + val", np.concatenate([train, val]), ids)


def test_split_errors():
    with pytest.raises(ValueError, match=r"train_val_split: ids must be 1-D, got shape \(2, 2\)"):
        train_val_split(np.zeros((2, 2)))


@given(n=st.integers(10, 300), block=st.integers(1, 9), batch=st.integers(1, 5), seed=seeds)
def test_batches_are_windows_and_shifted_targets(n, block, batch, seed):
    data = np.arange(n) * 7 % 1000  # position i holds 7 i mod 1000: a window is recognisable
    x, y = get_batch(data, block, batch, np.random.default_rng(seed))
    assert x.shape == y.shape == (batch, block) and x.dtype == np.int64
    start = (x[:, 0] * 143) % 1000  # 7 * 143 = 1001 = 1 mod 1000 undoes the map (n <= 1000)
    assert_equal("x", x, data[start[:, None] + np.arange(block)])
    assert_equal("y", y, data[start[:, None] + np.arange(1, block + 1)])
    x2, y2 = get_batch(data, block, batch, np.random.default_rng(seed))
    assert_equal("x with the same seed", x2, x)


def test_batches_cover_the_data():
    data = np.arange(20)
    x, _ = get_batch(data, 4, 2000, np.random.default_rng(0))
    assert set(x[:, 0]) == set(range(16)), "some valid window start is never drawn"


def test_batch_errors():
    with pytest.raises(ValueError, match=r"get_batch: data has 5 tokens, fewer than block_size \+ 1 = 9"):
        get_batch(np.arange(5), 8, 2, np.random.default_rng(0))
