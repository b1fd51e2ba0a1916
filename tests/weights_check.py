#!/usr/bin/python3
"""weights_check.py - checks where onnxcc put a model's weights against the ONNX file itself
(tests/weights.sh). Prints "ok ..." or "FAIL ..." lines; exit status 1 on any FAIL.

  weights_check.py section MODEL.onnx OBJ.o SECTION
      every initializer's bytes are inside SECTION of the ELF object and in no other section of
      data (code may hold a small constant that LLVM folded into it)
  weights_check.py section-blob MODEL.onnx OBJ.o SECTION BLOB HEADER.h NAME
      the same for the tensors of an --emit-weights blob of the same model and target, for
      targets whose passes rearrange the initializers (Cortex-M4 packs Gemm weights)
  weights_check.py absent MODEL.onnx OBJ.o
      no initializer's bytes are anywhere in the object (--emit-weights took them out)
  weights_check.py blob MODEL.onnx BLOB HEADER.h NAME
      the blob follows the layout the README documents: magic, version, header size, size and
      key (as the header's macros say), each tensor at its NAME_WEIGHT_<k>_OFFSET, aligned,
      not overlapping, and equal to the initializer of that name; every initializer is there
Only initializers that the compiler keeps as they are can be found so; the models used
(models/mlp) keep all of theirs."""
import re
import struct
import sys

import onnx
from onnx import numpy_helper

failed = 0


def verdict(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += not ok


def initializers(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def elf_sections(path, code=False):
    """name -> list of contents (a relocatable object may hold several of one name); sections of
    code are left out unless `code`: LLVM may fold a small constant into it (an Arm literal pool)"""
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[5] == 1, "little-endian ELF expected"
    is64 = data[4] == 2
    if is64:
        shoff, = struct.unpack_from("<Q", data, 40)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    else:
        shoff, = struct.unpack_from("<I", data, 32)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 46)
    heads = []
    for i in range(shnum):
        at = shoff + i * shentsize
        if is64:
            name, typ, flags, _, off, size = struct.unpack_from("<IIQQQQ", data, at)
        else:
            name, typ, flags, _, off, size = struct.unpack_from("<IIIIII", data, at)
        heads.append((name, typ, flags, off, size))
    strs = heads[shstrndx][3]
    out = {}
    SHF_EXECINSTR, SHT_NOBITS = 4, 8
    for name, typ, flags, off, size in heads:
        n = data[strs + name:data.index(b"\0", strs + name)].decode()
        if code or not flags & SHF_EXECINSTR:
            out.setdefault(n, []).append(b"" if typ == SHT_NOBITS else data[off:off + size])
    return out


def blob_tensors(blob_path, header, name):
    """the tensors of an --emit-weights blob, by the header's offsets and sizes"""
    blob = open(blob_path, "rb").read()
    h = open(header).read()
    out = {}
    for k, wname in re.findall(r'^/\*   (\d+)  "([^"]*)"', h, re.M):
        off = int(re.search(r"^#define %s_WEIGHT_%s_OFFSET (\d+)$" % (name, k), h, re.M).group(1))
        n = int(re.search(r"^#define %s_WEIGHT_%s_SIZE (\d+)$" % (name, k), h, re.M).group(1))
        out[wname] = blob[off:off + n]
    return out


def check_section(model, obj, section, tensors=None):
    inits = initializers(model)
    secs = elf_sections(obj)
    verdict(section in secs, "%s: section %s present" % (obj, section))
    body = b"".join(secs.get(section, []))
    if tensors is None:
        tensors = {n: a.astype(a.dtype.newbyteorder("<")).tobytes() for n, a in inits.items()}
    for name, raw in tensors.items():
        # LLVM may fold loads of a small constant into code and its constant pools
        # (.rodata.cstN: a bias read as whole vectors); a weight of its own is not left there
        elsewhere = [s for s, parts in secs.items() if s != section and any(raw in p for p in parts)
                     and not (s.startswith(".rodata.cst") and len(raw) <= 256)]
        verdict(raw in body and not elsewhere, "%s: weight %s (%d bytes) %s %s%s" %
                (obj, name, len(raw), "in" if raw in body else "not in", section,
                 ", but in " + ", ".join(elsewhere) if elsewhere else ""))


def check_absent(model, obj):
    secs = elf_sections(obj, code=True)
    for name, a in initializers(model).items():
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        where = [s for s, parts in secs.items() if any(raw in p for p in parts)]
        verdict(not where, "%s: initializer %s (%d bytes) not in the object%s" %
                (obj, name, len(raw), ": it is in " + ", ".join(where) if where else ""))


def check_blob(model, blob_path, header, name):
    inits = initializers(model)
    blob = open(blob_path, "rb").read()
    h = open(header).read()

    def macro(m):
        v = re.search(r"^#define %s_%s (\S+)$" % (name, m), h, re.M)
        return int(v.group(1).rstrip("ul"), 0) if v else None

    size, align, key = macro("WEIGHTS_SIZE"), macro("WEIGHTS_ALIGN"), macro("WEIGHTS_KEY")
    hdr, version, count = macro("WEIGHTS_HEADER"), macro("WEIGHTS_VERSION"), macro("NUM_WEIGHTS")
    verdict(size == len(blob), "blob of %d bytes, header says %s" % (len(blob), size))
    magic, ver, hsize, bsize, bkey = struct.unpack_from("<8sIIQQ", blob, 0)
    verdict(magic == b"ONNXCCW\0" and ver == version == 1 and hsize == hdr and bsize == len(blob) and bkey == key,
            "blob header: magic %r, version %d, header %d bytes, size %d, key %#x" % (magic, ver, hsize, bsize, bkey))
    verdict(blob[32:hsize] == bytes(hsize - 32), "blob header padding is zero")
    names = re.findall(r'^/\*   (\d+)  "([^"]*)"', h, re.M)
    verdict(len(names) == count, "header lists %d weights, NUM_WEIGHTS %s" % (len(names), count))
    end, found = hsize, set()
    for k, wname in names:
        off, n = macro("WEIGHT_%s_OFFSET" % k), macro("WEIGHT_%s_SIZE" % k)
        ok = off % align == 0 and off >= end and off + n <= len(blob) and blob[end:off] == bytes(off - end)
        if wname in inits:
            a = inits[wname]
            ok = ok and blob[off:off + n] == a.astype(a.dtype.newbyteorder("<")).tobytes()
            found.add(wname)
        verdict(ok, "weight %s %s: %d bytes at %d" % (k, wname, n, off))
        end = off + n
    verdict(found == set(inits), "every initializer is in the blob (missing: %s)" % sorted(set(inits) - found))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "section":
        check_section(*sys.argv[2:])
    elif len(sys.argv) == 8 and sys.argv[1] == "section-blob":
        check_section(sys.argv[2], sys.argv[3], sys.argv[4], blob_tensors(*sys.argv[5:]))
    elif len(sys.argv) == 4 and sys.argv[1] == "absent":
        check_absent(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "blob":
        check_blob(*sys.argv[2:])
    else:
        sys.exit(__doc__)
    sys.exit(failed != 0)
