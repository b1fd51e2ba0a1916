# force.py IN OUT - a tuning file whose entries all take a candidate other than the default:
# the first one after `default` that --autotune's comment lists (tests/tune.sh checks that such
# schedules still compute the model). Fails if no entry has another candidate.
import re, sys
out, moved = [], 0
for line in open(sys.argv[1]):
    if line.startswith('#') or line.startswith('onnxcc-tune') or '#' not in line:
        out.append(line)
        continue
    entry, comment = line.split('#', 1)
    f = entry.split()
    alt = re.findall(r';\s*(tile \d+ \d+|pixels \d+) ', comment)
    if alt:
        f = f[:4] + alt[0].split()
        moved += 1
    out.append(' '.join(f) + '  #' + comment)
if not moved:
    sys.exit('force.py: no entry of %s has another candidate' % sys.argv[1])
open(sys.argv[2], 'w').write(''.join(out))
