"""docs/reference.md's safetensors layout is enough to write a dump from C: a small C program
following it (8-byte little-endian header size, JSON header, raw C-order bytes) writes the
reference's ids and loss, and `npgpt compare` reads and accepts them."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from npgpt.golden.tensorfile import read_safetensors

from .conftest import run

C_SOURCE = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    /* argv: OUT loss id0 id1 ... (B * T ids, B = 2) */
    int n_ids = argc - 3;
    double loss = strtod(argv[2], NULL);
    int64_t *ids = malloc(sizeof(int64_t) * n_ids);
    for (int i = 0; i < n_ids; i++) ids[i] = strtoll(argv[3 + i], NULL, 10);
    size_t ids_bytes = sizeof(int64_t) * n_ids;
    char header[512];
    snprintf(header, sizeof header,
             "{\"input/ids\":{\"dtype\":\"I64\",\"shape\":[2,%d],\"data_offsets\":[0,%zu]},"
             "\"loss\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[%zu,%zu]}}",
             n_ids / 2, ids_bytes, ids_bytes, ids_bytes + 8);
    uint64_t n = strlen(header);
    unsigned char size_le[8];
    for (int i = 0; i < 8; i++) size_le[i] = (unsigned char)(n >> (8 * i));
    FILE *f = fopen(argv[1], "wb");
    fwrite(size_le, 1, 8, f);
    fwrite(header, 1, n, f);
    for (int i = 0; i < n_ids; i++) {  /* little-endian, whatever the machine */
        unsigned char b[8];
        for (int j = 0; j < 8; j++) b[j] = (unsigned char)((uint64_t)ids[i] >> (8 * j));
        fwrite(b, 1, 8, f);
    }
    uint64_t bits;
    memcpy(&bits, &loss, 8);
    for (int j = 0; j < 8; j++) fputc((int)(bits >> (8 * j)) & 0xff, f);
    fclose(f);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_dump_written_from_c_is_read_and_compared(capsys, tmp_path, ref64):
    (tmp_path / "w.c").write_text(C_SOURCE)
    subprocess.run(["cc", "-O0", "-o", str(tmp_path / "w"), str(tmp_path / "w.c")], check=True)
    t, _ = read_safetensors(ref64)
    args = [repr(float(t["loss"]))] + [str(int(i)) for i in np.asarray(t["input/ids"]).ravel()]
    subprocess.run([str(tmp_path / "w"), str(tmp_path / "c.safetensors"), *args], check=True)
    status, out, err = run(
        capsys, "compare", tmp_path / "c.safetensors", "--reference", ref64, "--format", "json"
    )
    rep = json.loads(out)
    assert status == 0 and [r["name"] for r in rep["tensors"]] == ["input/ids", "loss"], (err, rep["tensors"])
    assert rep["tensors"][1]["rel_err"] == 0.0, f"loss written from C differs: {rep['tensors'][1]}"
