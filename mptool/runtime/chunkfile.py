"""Checkpoint chunk files that hold data only: a typed JSON structure and ``.npy`` arrays, bound by an HMAC.

A chunk is a ZIP archive of ``.npy`` members, stored uncompressed (so it is a valid
``.npz``: ``numpy.load(path, allow_pickle=False)`` opens it):

- ``header.npy``: UTF-8 JSON as a uint8 array: the format, the run key, what the chunk
  is (a task of a ``run_tasks`` call, or a stage chunk) and the *structure* of the value;
- ``a0.npy``, ``a1.npy``, ...: the value's arrays (numbers, booleans, fixed-width text);
- ``hmac.npy``: HMAC-SHA-256, under the user's checkpoint key, of the run key the reader
  expects and of every member above, in order.

The structure is a tree of typed nodes: JSON ``null``/``true``/``false``, integers and
strings stand for themselves; every other node is ``{"t": TAG, ...}`` with TAG one of
:data:`TAGS` (float, scalar, ndarray, objarray, list, tuple, dict, frame). Nothing in a
chunk names a class, a module or a function, so reading one cannot run code; arrays are
read with ``allow_pickle=False``. :func:`encode` refuses any other type (a bug of the
caller, not bad input), and :func:`read` checks the container's shape, then the run key,
then the HMAC, and only then parses arrays and decodes the structure; any deviation is a
:class:`ChunkError` naming what is wrong.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import zipfile
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pandas as pd

#: Node tags of the structure (anything else is refused when reading).
TAGS = ("float", "scalar", "ndarray", "objarray", "list", "tuple", "dict", "frame")
#: Array dtype kinds a chunk may hold: booleans, integers, floats, complex, fixed-width text.
ARRAY_KINDS = frozenset("biufcU")
#: Deepest nesting of structure nodes written or read.
MAX_DEPTH = 32
#: Largest header member (JSON structure), members per chunk, and chunk file read.
MAX_HEADER_BYTES = 64 << 20
MAX_MEMBERS = 4096
MAX_CHUNK_BYTES = 1 << 30
_DOMAIN = b"mptool-checkpoint-chunk\x00"
_BLOCK = 1 << 20
_DTYPE_TEXT = re.compile(r"[<>|=][biufcO][0-9]{0,2}")


class ChunkError(ValueError):
    """A chunk file that must not be loaded; ``kind`` is malformed, foreign or unverified."""

    def __init__(self, kind: str, detail: str, header: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.kind = kind
        self.header = header


def canonical(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces): what run keys are compared and hashed as."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


# --------------------------------------------------------------------------------------
# typed structure: encode


def encode(value: Any, arrays: list[np.ndarray], depth: int = 0) -> Any:
    """The structure node of ``value``; its arrays are appended to ``arrays`` (TypeError if unsupported)."""
    if depth > MAX_DEPTH:
        raise TypeError("a checkpoint value nested more than 32 levels deep")
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return {"t": "float", "v": value.hex()}
    if isinstance(value, np.generic):
        return {"t": "scalar", "ref": _add_array(np.asarray(value), arrays)}
    if kind is np.ndarray:
        if value.dtype.kind in ARRAY_KINDS:
            return {"t": "ndarray", "ref": _add_array(value, arrays)}
        if value.dtype.kind == "O":
            return _encode_objects(value, arrays, depth)
        raise TypeError(f"a checkpoint cannot hold an array of dtype {value.dtype}")
    if kind in (list, tuple):
        return {"t": kind.__name__, "v": [encode(v, arrays, depth + 1) for v in value]}
    if kind is dict:
        pairs = [[encode(k, arrays, depth + 1), encode(v, arrays, depth + 1)] for k, v in value.items()]
        return {"t": "dict", "v": pairs}
    if kind is pd.DataFrame:
        return _encode_frame(value, arrays, depth)
    raise TypeError(f"a checkpoint cannot hold a {kind.__module__}.{kind.__qualname__}")


def _add_array(arr: np.ndarray, arrays: list[np.ndarray]) -> int:
    if arr.dtype.kind not in ARRAY_KINDS:
        raise TypeError(f"a checkpoint cannot hold an array of dtype {arr.dtype}")
    arrays.append(arr)
    return len(arrays) - 1


def _encode_objects(value: np.ndarray, arrays: list[np.ndarray], depth: int) -> dict[str, Any]:
    """An object array: as fixed-width text when every element is a str, else element by element."""
    flat = value.ravel()
    if all(type(v) is str and not v.endswith("\x00") for v in flat):
        return {"t": "objarray", "ref": _add_array(value.astype(str), arrays)}
    return {"t": "objarray", "shape": list(value.shape), "v": [encode(v, arrays, depth + 1) for v in flat]}


def _dtype_tag(dtype: Any) -> str:
    """A column's dtype as text: numpy numbers/bool/object, or pandas' string dtype."""
    if isinstance(dtype, np.dtype) and dtype.kind in "biufcO":
        return dtype.str
    if isinstance(dtype, pd.StringDtype):
        return f"string:{dtype.storage}:{'nan' if isinstance(dtype.na_value, float) else 'NA'}"
    raise TypeError(f"a checkpoint cannot hold a DataFrame column of dtype {dtype}")


def _encode_frame(frame: pd.DataFrame, arrays: list[np.ndarray], depth: int) -> dict[str, Any]:
    index = frame.index
    if type(index) is not pd.RangeIndex or index.name is not None:
        raise TypeError("a checkpoint holds DataFrames with an unnamed RangeIndex only")
    columns = [
        {"dtype": _dtype_tag(frame.dtypes.iloc[j]), "v": encode(frame.iloc[:, j].to_numpy(), arrays, depth + 1)}
        for j in range(frame.shape[1])
    ]
    return {
        "t": "frame",
        "names": encode(list(frame.columns), arrays, depth + 1),
        "names_dtype": _dtype_tag(frame.columns.dtype),
        "range": [index.start, index.stop, index.step],
        "columns": columns,
    }


# --------------------------------------------------------------------------------------
# typed structure: decode


def decode(node: Any, arrays: list[np.ndarray], depth: int = 0) -> Any:
    """The value of structure ``node`` (ChunkError on an unknown tag or a malformed node)."""
    if depth > MAX_DEPTH:
        raise ChunkError("malformed", "the structure is nested too deeply")
    kind = type(node)
    if node is None or kind in (bool, int, str):
        return node
    if kind is not dict:
        raise ChunkError("malformed", f"an untagged JSON {kind.__name__} in the structure")
    tag = node.get("t")
    if tag not in TAGS:
        raise ChunkError("malformed", f"unknown type tag {str(tag)[:40]!r}")
    if tag == "float":
        return float.fromhex(_text(node["v"]))
    if tag in ("scalar", "ndarray"):
        arr = _ref(node, arrays)
        if tag == "scalar" and arr.ndim != 0:
            raise ChunkError("malformed", "a scalar node refers to an array that is not 0-d")
        return arr[()] if tag == "scalar" else arr
    if tag == "objarray":
        return _decode_objects(node, arrays, depth)
    if tag in ("list", "tuple"):
        items = [decode(v, arrays, depth + 1) for v in _list(node["v"])]
        return items if tag == "list" else tuple(items)
    if tag == "dict":
        return {decode(k, arrays, depth + 1): decode(v, arrays, depth + 1) for k, v in map(_pair, _list(node["v"]))}
    return _decode_frame(node, arrays, depth)


def _text(v: Any) -> str:
    if type(v) is not str:
        raise ChunkError("malformed", "a text field holds something else")
    return v


def _list(v: Any) -> list[Any]:
    if type(v) is not list:
        raise ChunkError("malformed", "a list field holds something else")
    return v


def _pair(v: Any) -> list[Any]:
    if type(v) is not list or len(v) != 2:
        raise ChunkError("malformed", "a dict entry is not a [key, value] pair")
    return v


def _ref(node: dict[str, Any], arrays: list[np.ndarray]) -> np.ndarray:
    ref = node.get("ref")
    if type(ref) is not int or not 0 <= ref < len(arrays):
        raise ChunkError("malformed", "an array reference points to no member")
    return arrays[ref]


def _decode_objects(node: dict[str, Any], arrays: list[np.ndarray], depth: int) -> np.ndarray:
    if "ref" in node:
        arr = _ref(node, arrays)
        if arr.dtype.kind != "U":
            raise ChunkError("malformed", "a text array member is not text")
        return arr.astype(object)
    shape = tuple(_list(node["shape"]))
    items = [decode(v, arrays, depth + 1) for v in _list(node["v"])]
    if any(type(s) is not int or s < 0 for s in shape) or int(np.prod(shape)) != len(items):
        raise ChunkError("malformed", "an object array's shape does not match its elements")
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out.reshape(shape)


def _dtype_of(tag: Any) -> Any:
    """The dtype named by :func:`_dtype_tag` (ChunkError on anything else)."""
    text = _text(tag)
    if text.startswith("string:"):
        parts = text.split(":")
        if len(parts) != 3 or parts[1] not in ("python", "pyarrow") or parts[2] not in ("nan", "NA"):
            raise ChunkError("malformed", f"unknown column dtype {text[:40]!r}")
        return pd.StringDtype(storage=parts[1], na_value=np.nan if parts[2] == "nan" else pd.NA)
    if not _DTYPE_TEXT.fullmatch(text):
        raise ChunkError("malformed", f"unknown column dtype {text[:40]!r}")
    return np.dtype(text)


def _decode_frame(node: dict[str, Any], arrays: list[np.ndarray], depth: int) -> pd.DataFrame:
    start, stop, step = _list(node["range"])
    if not all(type(v) is int for v in (start, stop, step)) or step == 0:
        raise ChunkError("malformed", "a frame's index is not a range")
    index = pd.RangeIndex(start, stop, step)
    names = decode(node["names"], arrays, depth + 1)
    specs = _list(node["columns"])
    if type(names) is not list or len(names) != len(specs):
        raise ChunkError("malformed", "a frame's column names do not match its columns")
    data = {}
    for j, spec in enumerate(specs):
        values = decode(spec["v"], arrays, depth + 1)
        if type(values) is not np.ndarray or values.shape != (len(index),):
            raise ChunkError("malformed", "a frame column does not match the frame's length")
        data[j] = pd.Series(values, index=index, dtype=_dtype_of(spec["dtype"]), copy=False)
    frame = pd.DataFrame(data, index=index)
    frame.columns = pd.Index(names, dtype=_dtype_of(node["names_dtype"]))
    return frame


# --------------------------------------------------------------------------------------
# the container


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _mac(secret: bytes, binding: bytes, members: Iterator[tuple[str, int, Iterator[bytes]]]) -> str:
    """HMAC-SHA-256 of the expected run key and of each member (name, length, bytes), in order."""
    mac = hmac.new(secret, _DOMAIN, hashlib.sha256)
    mac.update(len(binding).to_bytes(8, "little") + binding)
    for name, size, blocks in members:
        mac.update(len(name).to_bytes(2, "little") + name.encode() + size.to_bytes(8, "little"))
        for block in blocks:
            mac.update(block)
    return mac.hexdigest()


def pack(value: Any, header: dict[str, Any], secret: bytes, binding: bytes) -> bytes:
    """The bytes of a chunk holding ``value``, described by ``header``, signed for ``binding``."""
    arrays: list[np.ndarray] = []
    structure = encode(value, arrays)
    head = json.dumps({**header, "value": structure}, separators=(",", ":"), default=str).encode()
    members = [("header.npy", _npy(np.frombuffer(head, dtype=np.uint8)))]
    members += [(f"a{i}.npy", _npy(a)) for i, a in enumerate(arrays)]
    digest = _mac(secret, binding, ((n, len(b), iter([b])) for n, b in members))
    members.append(("hmac.npy", _npy(np.frombuffer(digest.encode(), dtype=np.uint8))))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members:
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def _read_npy(data: bytes, what: str) -> np.ndarray:
    try:
        arr = np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ChunkError("malformed", f"member {what} is not a plain .npy array ({str(exc)[:80]})") from None
    if arr.dtype.kind not in ARRAY_KINDS:
        raise ChunkError("malformed", f"member {what} has dtype {arr.dtype}")
    return arr


def _members(zf: zipfile.ZipFile, size: int) -> list[zipfile.ZipInfo]:
    """The members of a chunk, checked: header, a0..aN, hmac; stored uncompressed, within the file."""
    infos = zf.infolist()
    if not 2 <= len(infos) <= MAX_MEMBERS:
        raise ChunkError("malformed", f"{len(infos)} members")
    expected = ["header.npy", *(f"a{i}.npy" for i in range(len(infos) - 2)), "hmac.npy"]
    if [i.filename for i in infos] != expected:
        raise ChunkError("malformed", "unexpected member names")
    if any(i.compress_type != zipfile.ZIP_STORED or i.flag_bits & 1 for i in infos):
        raise ChunkError("malformed", "a member is compressed or encrypted")
    if sum(i.file_size for i in infos) > size or infos[0].file_size > MAX_HEADER_BYTES or infos[-1].file_size > 1024:
        raise ChunkError("malformed", "member sizes exceed the file")
    return infos


def _blocks(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    with zf.open(info) as fh:
        while block := fh.read(_BLOCK):
            yield block


def read(fh: IO[bytes], size: int, secret: bytes, binding: bytes) -> tuple[dict[str, Any], Any]:
    """(header, value) of the chunk in ``fh`` (``size`` bytes); ChunkError unless it verifies for ``binding``.

    Checks, in order: container shape, run key (``foreign``), HMAC (``unverified``), then
    parses the arrays (``allow_pickle=False``) and decodes the structure (``malformed``).
    """
    if size > MAX_CHUNK_BYTES:
        raise ChunkError("malformed", f"{size} bytes, more than a chunk mptool writes")
    try:
        with zipfile.ZipFile(fh) as zf:
            infos = _members(zf, size)
            header = _header(zf.read(infos[0]))
            if canonical(header.get("key")) != binding:
                raise ChunkError("foreign", "it belongs to another run", header)
            parts = ((i.filename, i.file_size, _blocks(zf, i)) for i in infos[:-1])
            digest = _mac(secret, binding, parts)
            stored = _read_npy(zf.read(infos[-1]), "hmac.npy")
            if stored.dtype != np.uint8 or not hmac.compare_digest(stored.tobytes(), digest.encode()):
                raise ChunkError("unverified", "its HMAC does not match", header)
            arrays = [_read_npy(zf.read(i), i.filename) for i in infos[1:-1]]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError) as exc:
        raise ChunkError("malformed", f"not a readable archive: {str(exc)[:80]}") from None
    try:
        return header, decode(header.get("value"), arrays)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, RecursionError) as exc:
        if isinstance(exc, ChunkError):
            raise
        raise ChunkError("malformed", f"malformed structure ({exc.__class__.__name__})", header) from None


def _header(data: bytes) -> dict[str, Any]:
    arr = _read_npy(data, "header.npy")
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise ChunkError("malformed", "the header is not UTF-8 bytes")
    try:
        header = json.loads(arr.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ChunkError("malformed", "the header is not JSON") from None
    if type(header) is not dict:
        raise ChunkError("malformed", "the header is not a JSON object")
    return header
