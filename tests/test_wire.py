"""The judge's side of the exchange: nothing a worker sends is trusted beyond bytes of an announced size."""
import os

import pytest
import torch

from runners.wire import (
    Channel,
    WireError,
    decode_value,
    encode_value,
    read_tensor,
    write_tensor,
)


def test_a_tensor_crosses_as_plain_dense_bytes(tmp_path):
    t = torch.randn(4, 6, dtype=torch.float16)[:, ::2]  # strided
    meta = write_tensor(tmp_path, "t.bin", t)
    back = read_tensor(meta, tmp_path, 1 << 20)
    assert type(back) is torch.Tensor and back.is_contiguous() and torch.equal(back, t)
    assert meta["strides"] == [6, 2]  # the layout is reported, for the judge's layout check


def test_headers_that_lie_are_refused(tmp_path):
    meta = write_tensor(tmp_path, "t.bin", torch.ones(8))
    with pytest.raises(WireError, match="outside the exchange folder"):
        read_tensor({**meta, "file": "/etc/passwd"}, tmp_path, 1 << 20)
    with pytest.raises(WireError, match="bytes"):
        read_tensor({**meta, "shape": [9]}, tmp_path, 1 << 20)
    with pytest.raises(WireError, match="larger than"):
        read_tensor(meta, tmp_path, 16)
    with pytest.raises(WireError, match="unsupported dtype"):
        read_tensor({**meta, "dtype": "object"}, tmp_path, 1 << 20)
    (tmp_path / "t.bin").write_bytes(b"\0" * 7)  # truncated behind the header's back
    with pytest.raises(WireError, match="holds 7 bytes"):
        read_tensor(meta, tmp_path, 1 << 20)


def test_an_input_crosses_with_its_whole_storage(tmp_path):
    """The judge's inputs (``storage=True``): the worker gets the view's strides and offset and every byte of the
    storage around it, the judge's padding included."""
    wide = torch.arange(40, dtype=torch.float32)
    view = wide.as_strided((3, 6), (10, 1), 4)
    meta = write_tensor(tmp_path, "v.bin", view, storage=True)
    assert meta["nbytes"] == 160 and meta["offset"] == 4 and meta["strides"] == [10, 1]
    back = read_tensor(meta, tmp_path, 1 << 20, storage=True)
    assert torch.equal(back, view) and back.stride() == (10, 1) and back.storage_offset() == 4
    assert torch.equal(back.as_strided((40,), (1,), 0), wide)
    with pytest.raises(WireError, match="bytes"):  # the judge reads a worker's outputs as dense values only
        read_tensor(meta, tmp_path, 1 << 20)


def test_storage_headers_that_reach_outside_the_storage_are_refused(tmp_path):
    meta = write_tensor(tmp_path, "v.bin", torch.zeros(40).as_strided((3, 6), (10, 1), 4), storage=True)
    for bad, match in [({"offset": 20}, "reaches past"), ({"strides": [20, 1]}, "reaches past"),
                       ({"strides": [-10, 1]}, "bad strides"), ({"strides": [10]}, "bad strides"),
                       ({"offset": -1}, "bad storage offset"), ({"offset": None}, "bad storage offset"),
                       ({"nbytes": 158}, "bad storage size")]:
        with pytest.raises(WireError, match=match):
            read_tensor({**meta, **bad}, tmp_path, 1 << 20, storage=True)
    with pytest.raises(WireError, match="larger than"):
        read_tensor(meta, tmp_path, 100, storage=True)


def test_unknown_values_never_compare_equal(tmp_path):
    class Odd:
        pass

    meta = encode_value(tmp_path, "o", (torch.ones(2), Odd()))
    out = decode_value(meta, tmp_path, 1 << 20)
    assert torch.equal(out[0], torch.ones(2)) and isinstance(out[1], str) and "Odd" in out[1]


def test_oversized_messages_are_refused():
    r, w = os.pipe()
    try:
        os.write(w, (1 << 30).to_bytes(4, "little"))
        with pytest.raises(WireError, match="over the"):
            Channel(r, w).recv(timeout=5)
    finally:
        os.close(r)
        os.close(w)
