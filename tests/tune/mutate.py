# mutate.py IN OUTDIR N - N tuning files made from IN by random byte edits (flips, deletions,
# duplicated or truncated lines, bytes 0-255 inserted), seed fixed: tests/tune.sh reads each
# with --tune-file and wants exit 0 or a FILE:LINE error with exit 1, never a crash.
import os, random, sys
src = open(sys.argv[1], 'rb').read()
rng = random.Random(16)
os.makedirs(sys.argv[2], exist_ok=True)
for n in range(int(sys.argv[3])):
    b = bytearray(src)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(5)
        i = rng.randrange(len(b) + 1)
        if op == 0 and i < len(b): b[i] = rng.randrange(256)
        elif op == 1: del b[i:i + rng.randint(1, 20)]
        elif op == 2: b[i:i] = bytes([rng.randrange(256)])
        elif op == 3:
            lines = b.split(b'\n'); j = rng.randrange(len(lines))
            lines.insert(j, lines[rng.randrange(len(lines))]); b = bytearray(b'\n'.join(lines))
        else: b = b[:i]
    open(os.path.join(sys.argv[2], 'mut-%d.tune' % n), 'wb').write(bytes(b))
