#!/usr/bin/python3
"""report.py - checks a page of onnxcc --report against what the compiler says elsewhere.

  report.py PAGE.html MODEL.onnx KIR.txt [HEADER.h|- [VERBOSE.log]]

KIR.txt is `onnxcc --print-after=bufferize` of the same compilation (its kernels, and each
temporary's offset and live range); HEADER.h the header of that compilation (NAME_ARENA_SIZE,
NAME_FLASH_SIZE, NAME_STACK_SIZE, NAME_MACS); VERBOSE.log its -v output (the memory line).
The ONNX nodes come from the model itself (the onnx package). Checks:
  - the page parses (html.parser, every element closed in order; the SVG with xml.etree);
  - nothing is fetched: no src= or href= attributes, no <link>, no url(), no @import, and no
    http:// or https:// anywhere;
  - the summary's arena, flash, stack and MACs equal the header's macros and -v's figures;
  - every kernel of the program has a row and a box on the arena picture's kernel axis, in
    order; every ONNX node (subgraphs too) appears with its name;
  - the rectangles are exactly the temporaries with their offsets and live ranges; no two
    share bytes at the same kernel, unless they are an in-place pair (the same bytes, one
    dying at the kernel that writes the other);
  - the marked peak is the highest byte in use, within the arena, and at least the lower
    bound, which equals the largest sum of live temporaries at one kernel (in-place pairs
    counted once).
Prints one "ok"/"FAIL" line per check (tests/lib.sh's tally counts them).
"""
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import onnx

VOID = {"meta", "br", "input", "img", "hr", "link", "col", "wbr", "area", "base", "source"}
# optional end tags that html allows to be left out
AUTOCLOSE = {"p", "li", "tr", "td", "th", "option"}


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.elems, self.text = [], [], [], []
        self.svg_start = self.svg_end = None

    def handle_starttag(self, tag, attrs):
        self.elems.append((tag, dict(attrs)))
        if tag == "svg":
            self.svg_start = self.getpos()
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.elems.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg_end = self.getpos()
        if tag in VOID:
            return
        while self.stack and self.stack[-1] != tag and self.stack[-1] in AUTOCLOSE:
            self.stack.pop()
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> at %s closes <%s>" % (tag, self.getpos(), self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


results = []


def check(what, cond, detail=""):
    results.append(cond)
    print(("ok   " if cond else "FAIL ") + what + ("" if cond or not detail else ": " + str(detail)))


def all_nodes(g, out):
    for n in g.node:
        out.append((n.name, n.op_type))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                all_nodes(a.g, out)
            for sub in a.graphs:
                all_nodes(sub, out)
    return out


def value(elems, ident):
    for tag, a in elems:
        if a.get("id") == ident:
            return int(a["data-value"])
    return None


def main():
    page_path, model_path, kir_path = sys.argv[1:4]
    header = open(sys.argv[4]).read() if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    verbose = open(sys.argv[5]).read() if len(sys.argv) > 5 else None
    html = open(page_path, encoding="utf-8").read()
    p = Page()
    p.feed(html)
    p.close()
    check("the page's elements nest", not p.errors and all(t in AUTOCLOSE for t in p.stack),
          p.errors[:3] or p.stack)
    # the SVG on its own is well-formed XML
    m = re.search(r"<svg.*?</svg>", html, re.S)
    if m:
        svg = re.sub(r"&nbsp;", " ", m.group(0))
        svg = re.sub(r"(\s[\w-]+)=([^\s\"'>]+)", r'\1="\2"', svg)  # unquoted attributes
        try:
            ET.fromstring(svg)
            check("the arena SVG is well-formed XML", True)
        except ET.ParseError as e:
            check("the arena SVG is well-formed XML", False, e)
    external = [a for tag, attrs in p.elems for a in attrs if a in ("src", "href", "xlink:href")]
    external += [tag for tag, _ in p.elems if tag in ("link", "iframe", "img", "object", "embed")]
    for pat in ("http://", "https://", "url(", "@import"):
        if pat in html:
            external.append(pat)
    check("nothing outside the page is referenced", not external, external)

    # the summary against the header and -v
    elems = p.elems
    got = {k: value(elems, k) for k in ("arena", "flash", "stack", "macs", "arena-size", "peak", "lower-bound")}
    if header:
        macro = {}
        for k, name in (("arena", "ARENA_SIZE"), ("flash", "FLASH_SIZE"), ("stack", "STACK_SIZE"), ("macs", "MACS")):
            mm = re.search(r"#define \w+_%s (\d+)" % name, header)
            macro[k] = int(mm.group(1)) if mm else None
        check("arena, flash, stack and MACs equal the header's macros", all(got[k] == macro[k] for k in macro),
              (got, macro))
    if verbose:
        mm = re.search(r"memory: flash (-?\d+) B .*arena (\d+) B .*stack (-?\d+) B at most; (\d+) multiply", verbose)
        want = mm and {"flash": int(mm.group(1)), "arena": int(mm.group(2)), "stack": int(mm.group(3)),
                       "macs": int(mm.group(4))}
        check("arena, flash, stack and MACs equal -v's memory report", want and all(got[k] == want[k] for k in want),
              (got, want))

    # kernels and temporaries of the program as --print-after=bufferize prints it
    kir = open(kir_path).read()
    kernels = re.findall(r"^(?:kernel|loop|if|else|end) (\S+?):?(?: |$)", kir, re.M)
    temps = {}
    for name, off, first, last in re.findall(r"^  buf %(\S+): \S+ temp @(\d+) live (\d+)\.\.(\d+)", kir, re.M):
        temps[name] = (int(off), int(first), int(last))
    mm = re.search(r"\(arena (\d+) bytes", kir)
    arena = int(mm.group(1)) if mm else None
    check("the arena size is the program's", got["arena"] == arena == got["arena-size"], (got["arena"], arena))
    rows = [a.get("data-name") for tag, a in elems if tag == "tr" and "kernel" in a.get("class", "").split()]
    check("a row per kernel, in order (%d)" % len(kernels), rows == kernels, (rows[:5], kernels[:5]))
    boxes = [int(a["data-kernel"]) for tag, a in elems if tag == "rect" and a.get("class") == "kbox"]
    check("a box per kernel on the arena picture", not temps or boxes == list(range(len(kernels))),
          (len(boxes), len(kernels)))
    text = "".join(p.text)
    nodes = all_nodes(onnx.load(model_path).graph, [])
    missing = [n for n, op in nodes if n and n not in text]
    check("every ONNX node's name appears (%d)" % len(nodes), not missing, missing[:5])
    onnx_rows = sum(1 for tag, a in elems if tag == "tr" and "onnx" in a.get("class", "").split())
    check("a row per ONNX node", onnx_rows == len(nodes), (onnx_rows, len(nodes)))

    rects = []
    for tag, a in elems:
        if tag == "rect" and a.get("class") == "temp":
            rects.append((a["data-name"], int(a["data-offset"]), int(a["data-bytes"]), int(a["data-first"]),
                          int(a["data-last"])))
    placed = {n: (o, f, l) for n, o, b, f, l in rects}
    check("the rectangles are the temporaries (%d), at their offsets and live ranges" % len(temps),
          placed == temps, (sorted(set(placed) ^ set(temps))[:5], len(placed), len(temps)))
    bad = []
    inplace = {}
    for i, (n1, o1, b1, f1, l1) in enumerate(rects):
        for n2, o2, b2, f2, l2 in rects[i + 1:]:
            if o1 < o2 + b2 and o2 < o1 + b1 and f1 <= l2 and f2 <= l1:
                # the one overlap allowed: the same bytes at one kernel, where one dies and
                # the other is written
                pair = o1 == o2 and b1 == b2 and (l1 == f2 or l2 == f1) and min(l1, l2) == max(f1, f2)
                if pair:
                    inplace.setdefault(n1, set()).add(n2)
                    inplace.setdefault(n2, set()).add(n1)
                else:
                    bad.append((n1, n2))
    check("no two temporaries share bytes at one kernel (but in-place pairs: %d)" % (sum(map(len, inplace.values())) // 2),
          not bad, bad[:3])
    # lower bound: per kernel, the live groups' sizes (an in-place chain is one group)
    group = {n: n for n, *_ in rects}

    def find(x):
        while group[x] != x:
            x = group[x]
        return x
    for n, others in inplace.items():
        for o in others:
            group[find(o)] = find(n)
    span = {}
    for n, o, b, f, l in rects:
        g = find(n)
        lo, hi, size = span.get(g, (f, l, b))
        span[g] = (min(lo, f), max(hi, l), max(size, b))
    nk = len(kernels)
    live = [sum(s for lo, hi, s in span.values() if lo <= k <= hi) for k in range(nk)]
    high = [max([o + b for n, o, b, f, l in rects if f <= k <= l] or [0]) for k in range(nk)]
    lb, peak = max(live or [0]), max(high or [0])
    check("the lower bound is the largest sum of live temporaries (%d)" % lb, got["lower-bound"] == lb,
          (got["lower-bound"], lb))
    check("the peak is the highest byte in use (%d), within the arena" % peak,
          got["peak"] == peak and peak <= (arena or 0), (got["peak"], peak, arena))
    check("the peak is at least the lower bound", peak >= lb, (peak, lb))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
