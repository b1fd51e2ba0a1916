# spearman.py FILE.tune... - how well the schedule's cost model (passes/sched_tile.c) ranks the
# candidates that --autotune measured: for each entry (a kernel signature) with 3 or more
# candidates, Spearman's rank correlation between the predicted costs and the measured times
# (ties get their mean rank; an entry whose predictions are all equal has none: the model
# cannot tell them apart). Prints per file and overall: the entries, the mean and median rho,
# how many the model could not rank, and how often the default (the model's choice) was the
# fastest measured or within 3% of it. Used for docs/architecture.md's figures.
import re, statistics, sys

def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r

def spearman(x, y):
    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = sum((a - mx) ** 2 for a in rx) ** 0.5
    sy = sum((b - my) ** 2 for b in ry) ** 0.5
    return None if sx == 0 or sy == 0 else sxy / (sx * sy)

cand = re.compile(r'(default|tile \d+ \d+|pixels \d+) ([0-9.]+) us \(model (-?\d+)\)')
allrho, allflat, allgood, alln = [], 0, 0, 0
for path in sys.argv[1:]:
    rho, flat, good, n = [], 0, 0, 0
    for line in open(path):
        if line.startswith('#') or '#' not in line:
            continue
        c = cand.findall(line.split('#', 1)[1])
        if len(c) < 3:
            continue
        us = [float(t) for _, t, _ in c]
        cost = [int(m) for _, _, m in c]
        n += 1
        good += us[0] <= min(us) * 1.03
        r = spearman(cost, us)
        if r is None:
            flat += 1
        else:
            rho.append(r)
    if n:
        print('%-24s %3d entries: rho mean %+.2f median %+.2f (%d unranked: equal predictions); default fastest '
              'or within 3%%: %d/%d' % (path.split('/')[-1], n, statistics.mean(rho) if rho else 0,
                                        statistics.median(rho) if rho else 0, flat, good, n))
    allrho += rho; allflat += flat; allgood += good; alln += n
if alln:
    print('%-24s %3d entries: rho mean %+.2f median %+.2f (%d unranked); default fastest or within 3%%: %d/%d'
          % ('all', alln, statistics.mean(allrho) if allrho else 0, statistics.median(allrho) if allrho else 0,
             allflat, allgood, alln))
