/* report.c - --report FILE.html: one self-contained page about a compilation, for a person.
 *
 * The driver makes a Report (report_new) when --report is given; cli_compile attaches it to the
 * first compilation (report_attach: the ONNX nodes as loaded, and the pipeline's on_pass hook,
 * which times each pass and notes after which graph pass each node was gone); once the
 * backend has measured the object, report_program keeps the program and the target; `bench`
 * adds per-kernel times (report_bench), --report-counts a firmware run's instructions per
 * kernel (report_counts); report_write writes the page like any other output,
 * through a temporary file renamed over the path (out_write), never half of it.
 *
 * The page has no external references: inline CSS, inline SVG, a few lines of script for the
 * search box. Its sections: the summary (target, CPU, -O, flash, weights, arena, stack, MACs,
 * time per pass), the kernels after fusion with the ONNX nodes each computes, its schedule and
 * its MACs, where every ONNX node went, the arena plan as a picture (kernels across, byte
 * offsets down, a rectangle per temporary over its live range), flash by weight tensor and by
 * kernel, and with bench the time per kernel. Elements carry data-* attributes with the
 * numbers they show, for tests/report.py to check against the header and -v. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

enum { MAX_PASSES = 64, BAR_ROWS = 40 };

typedef struct OrigNode {
    const Node *n;
    const char *name, *op_type, *in;    /* in: the node owning its subgraph, or NULL */
    const char *gone;                   /* the graph pass after which it was no longer there */
    const char *into;                   /* a graph fusion's node that took over its work */
} OrigNode;

struct Report {
    Arena *a;
    const char *path, *command, *model;
    bool attached, have_program;
    OrigNode *nodes;
    int nnodes;
    const char *pass[MAX_PASSES];
    double ms[MAX_PASSES], last_pass_end, backend_ms;
    int npasses;
    const Program *p;
    const char *triple, *cpu, *features;
    int opt_level;
    const double *us;                   /* bench: time per run of each kernel, or NULL */
    double peak_gflops, median_us;
    const char *counts_path;            /* --report-counts: a firmware run's counts */
    struct Count { const char *name; int64_t insns, macs; } *counts;
    int ncounts;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

Report *report_new(Arena *a, const char *path, const char *command, const char *model) {
    Report *r = ARENA_NEW(a, Report);
    *r = (Report){.a = a, .path = path, .command = command, .model = model};
    return r;
}

/* ---- what is kept during the compilation ---- */

static void add_nodes(Report *r, const Graph *g, const char *in, int *cap) {
    for (int i = 0; i < g->nnodes; i++) {
        const Node *n = g->nodes[i];
        if (n->dead) continue;
        r->nodes = arena_grow(r->a, r->nodes, r->nnodes, cap, r->nnodes + 1, sizeof *r->nodes);
        r->nodes[r->nnodes++] = (OrigNode){n, n->name, n->op_type, in, NULL, NULL};
        Graph *sub[8];
        int ns = ir_subgraphs(n, sub, COUNTOF(sub));
        for (int j = 0; j < ns && j < COUNTOF(sub); j++) add_nodes(r, sub[j], n->name, cap);
    }
}

static int cmp_ptr(const void *x, const void *y) {
    uintptr_t a = (uintptr_t)*(const void *const *)x, b = (uintptr_t)*(const void *const *)y;
    return (a > b) - (a < b);
}

static void live_nodes(const Graph *g, const Node ***out, int *n, int *cap, Arena *a) {
    for (int i = 0; i < g->nnodes; i++) {
        const Node *nd = g->nodes[i];
        if (nd->dead) continue;
        *out = arena_grow(a, *out, *n, cap, *n + 1, sizeof **out);
        (*out)[(*n)++] = nd;
        Graph *sub[8];
        int ns = ir_subgraphs(nd, sub, COUNTOF(sub));
        for (int j = 0; j < ns && j < COUNTOF(sub); j++) live_nodes(sub[j], out, n, cap, a);
    }
}

static bool has_value(Value *const *vs, int n, const Value *v) {
    for (int i = 0; i < n; i++)
        if (vs[i] && vs[i] == v) return true;
    return false;
}

/* The live node that took over a node a graph fusion removed (fuse_qdq, fuse_batchnorm):
 * one that now writes one of its outputs (BatchNormalization's, a QuantizeLinear's) or reads
 * its first input (a DequantizeLinear's integer data; not the scales, which many share), or
 * NULL. */
static const Node *taken_by(const Node *gone, const Node *const *live, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < gone->nout; j++)
            if (gone->out[j] && has_value(live[i]->out, live[i]->nout, gone->out[j])) return live[i];
    for (int i = 0; i < n; i++)
        if (gone->nin && gone->in[0] && has_value(live[i]->in, live[i]->nin, gone->in[0])) return live[i];
    return NULL;
}

static void on_pass(void *ctx, const char *pass, double ms, const Graph *g, const Program *p) {
    Report *r = ctx;
    if (r->npasses < MAX_PASSES) r->pass[r->npasses] = pass, r->ms[r->npasses++] = ms;
    r->last_pass_end = now_ms();
    if (!g) return;
    /* which nodes this pass took away (folded, simplified, fused at graph level) */
    const Node **live = NULL;
    int n = 0, cap = 0;
    live_nodes(g, &live, &n, &cap, r->a);
    if (n) qsort(live, (size_t)n, sizeof *live, cmp_ptr);
    bool fusion = strncmp(pass, "fuse_", 5) == 0;
    const Node **order = NULL;      /* the live nodes in graph order, for taken_by */
    int no = 0, cap2 = 0;
    if (fusion) live_nodes(g, &order, &no, &cap2, r->a);
    for (int i = 0; i < r->nnodes; i++) {
        OrigNode *o = &r->nodes[i];
        if (o->gone || (n && bsearch(&o->n, live, (size_t)n, sizeof *live, cmp_ptr))) continue;
        o->gone = pass;
        const Node *by = fusion ? taken_by(o->n, order, no) : NULL;
        if (by) o->into = by->name;
    }
}

void report_attach(Report *r, Graph *g, Options *o) {
    if (r->attached) {              /* check and bench compile again: the first one is shown */
        o->on_pass = NULL;
        return;
    }
    r->attached = true;
    int cap = 0;
    add_nodes(r, g, NULL, &cap);
    o->on_pass = on_pass;
    o->on_pass_ctx = r;
}

void report_program(Report *r, const Program *p, const Target *t, int opt_level) {
    if (r->have_program) return;
    r->have_program = true;
    r->p = p;
    r->triple = arena_strdup(r->a, t->triple);
    r->cpu = arena_strdup(r->a, t->cpu ? t->cpu : "");
    r->features = arena_strdup(r->a, t->features ? t->features : "");
    r->opt_level = opt_level;
    r->backend_ms = now_ms() - r->last_pass_end;
}

/* --report-counts FILE: the lines "kernel NAME: N instructions, M MACs" that the firmware
 * tests print (tests/firmware/main.c, from a --profile build whose clock counts
 * instructions); other lines are ignored, a file without any is an error. */
void report_counts(Report *r, const char *path) {
    size_t size;
    uint8_t *bytes = fe_read_file(r->a, path, &size);
    char *text = arena_alloc(r->a, size + 1);
    memcpy(text, bytes, size);
    int cap = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char name[256];
        long long insns, macs;
        if (sscanf(line, "kernel %255[^:]: %lld instructions, %lld MACs", name, &insns, &macs) == 3) {
            r->counts = arena_grow(r->a, r->counts, r->ncounts, &cap, r->ncounts + 1, sizeof *r->counts);
            r->counts[r->ncounts++] = (struct Count){arena_strdup(r->a, name), insns, macs};
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!r->ncounts) fatal(path, "no lines 'kernel NAME: N instructions, M MACs' (the firmware tests' profile output)");
    r->counts_path = path;
}

void report_bench(Report *r, const double *us, double peak_gflops, double median_us) {
    r->us = us;
    r->peak_gflops = peak_gflops;
    r->median_us = median_us;
}

/* ---- writing ---- */

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') fputc('?', f);
            else fputc(*s, f);
        }
    }
}

/* 1234567 -> "1.18 MiB" (exact bytes are in the data attributes and titles) */
static const char *human(Arena *a, int64_t b) {
    if (b < 0) return "unknown";
    if (b < 10 * 1024) return arena_printf(a, "%lld B", (long long)b);
    if (b < 1024 * 1024) return arena_printf(a, "%.1f KiB", (double)b / 1024);
    return arena_printf(a, "%.2f MiB", (double)b / (1024 * 1024));
}

/* 115605504 -> "115.6 M" (the exact count is the cell's title and the row's data-macs) */
static const char *count_str(Arena *a, int64_t n) {
    if (n < 100000) return arena_printf(a, "%lld", (long long)n);
    if (n < 100000000) return arena_printf(a, "%.1f k", (double)n / 1e3);
    if (n < 100000000000) return arena_printf(a, "%.1f M", (double)n / 1e6);
    return arena_printf(a, "%.1f G", (double)n / 1e9);
}

static const char *shape_str(Arena *a, const Buf *b) {
    const char *s = "";
    for (int d = 0; d < b->rank; d++) s = arena_printf(a, "%s%s%lld", s, d ? "x" : "", (long long)b->dims[d]);
    return b->rank ? s : "scalar";
}

/* A stable colour per name: a hue from a string hash. */
static int hue(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return (int)(h % 360);
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:16px;color:#222}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:2px 8px;text-align:left;vertical-align:top}"
    "tr:nth-child(even){background:#f4f4f4}th{background:#e8e8e8}"
    ".num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    ".sum td:first-child{color:#555;white-space:nowrap}.sum{max-width:760px}details{font-size:11px}"
    ".tag{display:inline-block;font-size:11px;padding:0 4px;border-radius:3px;margin-left:4px}"
    ".t-move{background:#ffe4b5}.t-float{background:#ffd0d0}.t-ctl{background:#dde}"
    ".sched{font-family:monospace;font-size:12px;color:#555}.nodes{font-size:12px}"
    ".bar{height:12px;background:#4a7fc1;display:inline-block}.bar2{background:#c17a4a}"
    ".muted{color:#777}#q{font-size:14px;padding:3px 6px;width:320px}"
    "svg text{font:11px system-ui,sans-serif}.lbl{pointer-events:none;fill:#222}.temp:hover{stroke:#000;stroke-width:1.5}"
    "#info{font-family:monospace;font-size:12px;min-height:1.4em;color:#333}.hide{display:none}"
    ".cols{display:flex;gap:32px;flex-wrap:wrap}";

/* Filters the rows marked .s by the search box (filled from the address's #q=TEXT, for a link
 * to a search); shows a temporary's details on hover. The
 * html element's data-script says whether the script ran to its end, data-load-ms how long the
 * page took to load (tests/report.sh reads them from a headless browser's DOM). */
static const char script[] =
    "window.onerror=function(m){document.documentElement.setAttribute('data-script','error: '+m);};"
    "function filt(){var q=document.getElementById('q').value.toLowerCase();"
    "document.querySelectorAll('tr.s').forEach(function(r){"
    "r.classList.toggle('hide',q!==''&&r.textContent.toLowerCase().indexOf(q)<0);});}"
    "document.querySelectorAll('rect.temp').forEach(function(e){e.addEventListener('mouseenter',"
    "function(){document.getElementById('info').textContent=e.firstChild.textContent;});});"
    "if(location.hash.indexOf('#q=')===0){document.getElementById('q').value="
    "decodeURIComponent(location.hash.slice(3));filt();}"
    "if(!document.documentElement.hasAttribute('data-script'))document.documentElement.setAttribute('data-script','ran');"
    "window.addEventListener('load',function(){document.documentElement.setAttribute('data-load-ms',"
    "Math.round(performance.now()));});";

static void summary_row(FILE *f, const char *id, const char *label, int64_t v, const char *shown, const char *note) {
    fprintf(f, "<tr><td>%s</td><td class=num id=\"%s\" data-value=\"%lld\">", label, id, (long long)v);
    esc(f, shown);
    fputs("</td><td class=muted>", f);
    esc(f, note);
    fputs("</td></tr>\n", f);
}

/* Whether each buffer (by id) is the storage of some kernel's parameter: a constant no kernel
 * reads (one the schedule repacked, say) is not in the object. */
static bool *used_bufs(Arena *a, const Program *p) {
    bool *u = ARENA_ARRAY(a, bool, p->nbufs + 1);
    for (int i = 0; i < p->nkernels; i++) {
        const Kernel *k = p->kernels[i];
        for (int j = 0; j < k->nparams; j++) {
            int id = kir_root(k->params[j])->id;
            if (id >= 0 && id < p->nbufs) u[id] = true;
        }
    }
    return u;
}

static bool is_weight(const Buf *b, const bool *used) {
    return b->kind == B_CONST && !b->alias && used[b->id] && kir_nbytes(b);
}

/* The bytes of the constants the kernels read (the weights). */
static int64_t const_bytes(Arena *a, const Program *p) {
    bool *used = used_bufs(a, p);
    int64_t s = 0;
    for (int i = 0; i < p->nbufs; i++)
        if (is_weight(p->bufs[i], used)) s += (int64_t)kir_nbytes(p->bufs[i]);
    return s;
}

static bool quantized(const Program *p) {
    for (int i = 0; i < p->nkernels; i++)
        if (!p->kernels[i]->ctl && kir_byte_kernel(p->kernels[i])) return true;
    return false;
}

static void write_summary(FILE *f, Report *r, int64_t macs) {
    Arena *a = r->a;
    const Program *p = r->p;
    int64_t w = const_bytes(a, p);
    fputs("<h2>Summary</h2><div class=cols><table class=sum>\n", f);
    fprintf(f, "<tr><td>model</td><td colspan=2>");
    esc(f, r->model);
    fprintf(f, " (<code>");
    esc(f, p->name);
    fprintf(f, "</code>)</td></tr>\n<tr><td>target</td><td colspan=2 id=target>");
    esc(f, r->triple);
    fprintf(f, "</td></tr>\n<tr><td>CPU</td><td colspan=2 id=cpu>");
    esc(f, r->cpu);
    if (r->features && *r->features) {
        fputs(" <details class=muted><summary>features</summary>", f);
        esc(f, r->features);
        fputs("</details>", f);
    }
    fprintf(f, "</td></tr>\n<tr><td>optimisation</td><td colspan=2 id=opt data-value=%d>-O%d</td></tr>\n",
            r->opt_level, r->opt_level);
    summary_row(f, "flash", "flash", p->flash_size, human(a, p->flash_size),
                "code and constants of the object (NAME_FLASH_SIZE)");
    if (p->flash_size >= 0 && !p->weights_size) {
        int64_t code = p->flash_size - w;
        summary_row(f, "weights", "&nbsp; weights", w, human(a, w), "constant tensors of the kernel IR");
        summary_row(f, "code", "&nbsp; code and the rest", code < 0 ? 0 : code, human(a, code < 0 ? 0 : code),
                    "flash less the weights: code, tables, small constants");
    } else if (p->weights_size) {
        summary_row(f, "weights", "weights", p->weights_size, human(a, p->weights_size),
                    p->weights_external ? "in the --emit-weights blob, not in flash (NAME_WEIGHTS_SIZE)"
                                        : "in the --weights-section section, not in flash (NAME_WEIGHTS_SIZE)");
    }
    summary_row(f, "arena", "arena", p->arena_size, human(a, p->arena_size),
                arena_printf(a, "NAME_ARENA_SIZE, aligned to %d bytes", p->arena_align));
    summary_row(f, "stack", "stack", p->stack_size, human(a, p->stack_size), "one call of NAME_run at most");
    summary_row(f, "macs", "multiply-accumulates", macs, arena_printf(a, "%lld", (long long)macs), "per run (NAME_MACS)");
    int nk = 0;
    for (int i = 0; i < p->nkernels; i++) nk += !p->kernels[i]->ctl;
    fprintf(f, "<tr><td>kernels</td><td class=num id=nkernels data-value=%d>%d</td><td class=muted>after fusion"
               "%s</td></tr>\n", p->nkernels, nk, nk != p->nkernels ? arena_printf(a, ", and %d control kernels", p->nkernels - nk) : "");
    fprintf(f, "<tr><td>ONNX nodes</td><td class=num id=nnodes data-value=%d>%d</td><td class=muted>as loaded, "
               "subgraphs included</td></tr>\n", r->nnodes, r->nnodes);
    if (r->us)
        fprintf(f, "<tr><td>latency</td><td class=num>%.2f us</td><td class=muted>median of single runs "
                   "(onnxcc bench), peak %.1f GFLOP/s</td></tr>\n", r->median_us, r->peak_gflops);
    fputs("</table>\n", f);
    /* compile time per pass */
    double total = r->backend_ms, mx = r->backend_ms;
    for (int i = 0; i < r->npasses; i++) total += r->ms[i], mx = r->ms[i] > mx ? r->ms[i] : mx;
    fputs("<table><tr><th>pass</th><th class=num>ms</th><th></th></tr>\n", f);
    for (int i = 0; i <= r->npasses; i++) {
        double ms = i < r->npasses ? r->ms[i] : r->backend_ms;
        fprintf(f, "<tr class=pass><td>%s</td><td class=num>%.2f</td><td><span class=bar style=\"width:%.0fpx\"></span></td></tr>\n",
                i < r->npasses ? r->pass[i] : "backend (LLVM)", ms, mx > 0 ? 200 * ms / mx : 0);
    }
    fprintf(f, "<tr><td><b>total</b></td><td class=num><b>%.2f</b></td><td></td></tr></table></div>\n", total);
}

static const char *node_op(const Report *r, const char *name) {
    for (int i = 0; i < r->nnodes; i++)
        if (strcmp(r->nodes[i].name, name) == 0) return r->nodes[i].op_type;
    return NULL;
}

/* A kernel's ONNX nodes (with their op types), then, after a "+", the nodes a graph fusion
 * folded into one of them. */
static void kernel_nodes(FILE *f, const Report *r, const Kernel *k) {
    for (int j = 0; j < k->nnodes; j++) {
        const char *op = node_op(r, k->nodes[j]);
        fprintf(f, "%s<span class=node>", j ? ", " : "");
        esc(f, k->nodes[j]);
        fputs("</span>", f);
        if (op) {
            fputs(" <span class=muted>", f);
            esc(f, op);
            fputs("</span>", f);
        }
    }
    int nf = 0;
    for (int j = 0; j < r->nnodes; j++) {
        const OrigNode *o = &r->nodes[j];
        bool mine = false;
        for (int l = 0; o->into && l < k->nnodes && !mine; l++) mine = strcmp(k->nodes[l], o->into) == 0;
        if (!mine) continue;
        fprintf(f, "%s<span class=node title=\"folded in by %s\">", nf++ ? ", " : "<br><span class=muted>+ </span>", o->gone);
        esc(f, o->name);
        fputs("</span> <span class=muted>", f);
        esc(f, o->op_type);
        fputs("</span>", f);
    }
}

static void kernel_row(FILE *f, const Report *r, int i, bool quant) {
    const Kernel *k = r->p->kernels[i];
    int64_t macs = 0, bytes = 0;
    if (!k->ctl) kir_kernel_work(r->p, i, &macs, &bytes);
    fputs("<tr class=\"s kernel\" data-name=\"", f);
    esc(f, k->name);
    fprintf(f, "\" data-macs=%lld><td class=num>%d</td><td>", (long long)macs, i);
    esc(f, k->name);
    if (k->ctl) fputs("<span class=\"tag t-ctl\">control</span>", f);
    else if (k->kclass == KC_COPY)
        fputs("<span class=\"tag t-move\" title=\"data movement: a layout change or copy\">layout</span>", f);
    else if (k->sched && strstr(k->sched, "layout("))
        fputs("<span class=\"tag t-move\" title=\"its schedule keeps a tensor in another layout (layout(...) in "
              "the schedule line)\">layout</span>", f);
    if (quant && !k->ctl && !kir_byte_kernel(k))
        fputs("<span class=\"tag t-float\" title=\"no 8-bit data: this part of the quantized model runs in float "
              "or wider integers\">float</span>", f);
    fputs("</td><td>", f);
    esc(f, k->ops);
    fputs("</td><td class=nodes>", f);
    kernel_nodes(f, r, k);
    fputs("</td><td class=sched>", f);
    esc(f, k->sched ? k->sched : "");
    fprintf(f, "</td><td class=num title=\"%lld\">%s</td></tr>\n", (long long)macs, count_str(r->a, macs));
}

/* Writes the names of the kernels that compute ONNX node `name`, comma-separated; returns
 * how many. */
static int kernels_of(FILE *f, const Program *p, const char *name) {
    int found = 0;
    for (int k = 0; k < p->nkernels; k++)
        for (int j = 0; j < p->kernels[k]->nnodes; j++)
            if (strcmp(p->kernels[k]->nodes[j], name) == 0) {
                fputs(found++ ? ", " : "", f);
                esc(f, p->kernels[k]->name);
                break;
            }
    return found;
}

/* Where an ONNX node went: its kernels, the node a graph fusion folded it into, the graph
 * pass after which it was gone, or nowhere (a constant, a view). */
static void node_row(FILE *f, const Report *r, const OrigNode *n) {
    fputs("<tr class=\"s onnx\" data-name=\"", f);
    esc(f, n->name);
    fputs("\"><td>", f);
    esc(f, n->name);
    fputs("</td><td>", f);
    esc(f, n->op_type);
    fputs("</td><td>", f);
    esc(f, n->in ? n->in : "");
    fputs("</td><td>", f);
    bool computed = kernels_of(f, r->p, n->name) > 0;
    if (computed) {
        /* its kernels are written */
    } else if (n->into) {
        fputs("<span class=muted>folded by ", f);
        esc(f, n->gone);
        fputs(" into node ", f);
        esc(f, n->into);
        fputs(":</span> ", f);
        kernels_of(f, r->p, n->into);
    } else if (n->gone) {
        fprintf(f, "<span class=muted>no kernel: gone after %s</span>", n->gone);
    } else {
        fputs("<span class=muted>no kernel: a constant, or a view of another tensor</span>", f);
    }
    fputs("</td></tr>\n", f);
}

static void write_kernels(FILE *f, Report *r) {
    bool quant = quantized(r->p);
    fputs("<h2>Kernels after fusion</h2>\n<p>Search kernels and ONNX nodes: <input id=q oninput=filt() "
          "placeholder=\"node name, op type, kernel...\"> <span class=muted>(filters the kernel and node "
          "tables)</span></p>\n<table id=kernels><tr><th>#</th><th>kernel</th><th>ops</th><th>ONNX nodes</th>"
          "<th>schedule</th><th class=num>MACs</th></tr>\n", f);
    for (int i = 0; i < r->p->nkernels; i++) kernel_row(f, r, i, quant);
    fputs("</table>\n<h2>ONNX nodes</h2>\n<table id=nodes><tr><th>node</th><th>op type</th><th>in subgraph of</th>"
          "<th>computed by</th></tr>\n", f);
    for (int i = 0; i < r->nnodes; i++) node_row(f, r, &r->nodes[i]);
    fputs("</table>\n", f);
}

/* ---- the arena plan ---- */

typedef struct Temp {
    const Buf *b;
    int64_t off, size;
    int first, last;
} Temp;

/* The temporaries and what the picture marks: the kernel where the highest byte is in use
 * (peak, at top bytes) and the kernel where the live temporaries add up most (lbk, lb). */
typedef struct Plan {
    Temp *t;
    int nt, nk, peak, lbk;
    int64_t top, lb;
} Plan;

static int find(int *g, int i) { return g[i] == i ? i : (g[i] = find(g, g[i])); }

static Plan arena_plan(Arena *a, const Program *p) {
    Plan pl = {.t = ARENA_ARRAY(a, Temp, p->nbufs + 1), .nk = p->nkernels};
    Temp *t = pl.t;
    for (int i = 0; i < p->nbufs; i++) {
        const Buf *b = p->bufs[i];
        if (b->kind != B_TEMP || b->alias || b->first < 0 || b->offset < 0 || !kir_nbytes(b)) continue;
        t[pl.nt++] = (Temp){b, b->offset, (int64_t)kir_nbytes(b), b->first, b->last};
    }
    /* In-place pairs (bufferize): an output written over an input that dies at the kernel that
     * writes it, at the same bytes. The pair lives at that kernel twice; it is one group. */
    int nt = pl.nt, nk = pl.nk;
    int *grp = ARENA_ARRAY(a, int, nt + 1), *gfirst = ARENA_ARRAY(a, int, nt + 1), *glast = ARENA_ARRAY(a, int, nt + 1);
    for (int i = 0; i < nt; i++) grp[i] = i, gfirst[i] = nk, glast[i] = -1;
    for (int i = 0; i < nt; i++)
        for (int j = 0; j < nt; j++)
            if (i != j && t[i].off == t[j].off && t[i].size == t[j].size && t[i].last == t[j].first)
                grp[find(grp, j)] = find(grp, i);
    for (int i = 0; i < nt; i++) {
        int g = find(grp, i);
        gfirst[g] = MIN(gfirst[g], t[i].first);
        glast[g] = MAX(glast[g], t[i].last);
    }
    /* per kernel: the sum of live groups (the lower bound) and the highest byte in use */
    int64_t *live = ARENA_ARRAY(a, int64_t, nk + 1), *high = ARENA_ARRAY(a, int64_t, nk + 1);
    for (int i = 0; i < nt; i++) {
        if (find(grp, i) == i)
            for (int k = gfirst[i]; k <= glast[i] && k < nk; k++) live[k] += t[i].size;
        for (int k = t[i].first; k <= t[i].last && k < nk; k++) high[k] = MAX(high[k], t[i].off + t[i].size);
    }
    for (int k = 0; k < nk; k++) {
        if (high[k] > high[pl.peak]) pl.peak = k;
        if (live[k] > live[pl.lbk]) pl.lbk = k;
    }
    pl.top = nk ? high[pl.peak] : 0;
    pl.lb = nk ? live[pl.lbk] : 0;
    return pl;
}

/* Where the picture puts things: kernels across (at least 6 px each), bytes down. */
typedef struct Geom {
    double left, top, w, h, kw, ys;
} Geom;

static void draw_axes(FILE *f, Arena *a, const Program *p, const Geom *g, int64_t bytes_max) {
    int nk = p->nkernels;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#999\"/>\n",
            g->left, g->top, g->w, g->h);
    /* kernel axis: one box per kernel, named in its title */
    for (int k = 0; k < nk; k++) {
        fprintf(f, "<rect class=kbox data-kernel=%d x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"8\" fill=\"%s\"><title>",
                k, g->left + k * g->kw, g->top + g->h, g->kw, k % 2 ? "#ccc" : "#aaa");
        esc(f, arena_printf(a, "kernel %d: %s (%s)", k, p->kernels[k]->name, p->kernels[k]->ops));
        fputs("</title></rect>\n", f);
    }
    int step = nk > 20 ? (nk + 19) / 20 : 1;
    for (int k = 0; k < nk; k += step) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=middle>", g->left + (k + 0.5) * g->kw, g->top + g->h + 22);
        int chars = (int)((g->kw - 4) / 6.2), len = (int)strlen(p->kernels[k]->name);
        /* names where they fit, else the kernel's number (the kernel table has both) */
        if (step == 1 && chars >= 6)
            esc(f, len <= chars ? p->kernels[k]->name : arena_printf(a, "%d %.*s..", k, chars - 5, p->kernels[k]->name));
        else fprintf(f, "%d", k);
        fputs("</text>\n", f);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">kernels, in the order they run &#8594;</text>\n", g->left, g->top + g->h + 38);
    fprintf(f, "<text x=\"12\" y=\"%.1f\" text-anchor=middle transform=\"rotate(-90 12 %.1f)\">byte offset</text>\n",
            g->top + g->h / 2, g->top + g->h / 2);
    for (int i = 0; i <= 4; i++) {
        int64_t bytes = (int64_t)((double)bytes_max * i / 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=end>", g->left - 4, g->top + (double)bytes * g->ys + 4);
        esc(f, human(a, bytes));
        fputs("</text>\n", f);
    }
}

/* One temporary: its rectangle (its numbers in data-* for tests/report.py, its description
 * in the title the browser shows on hover) and its name inside where it fits. */
static void draw_temp(FILE *f, Arena *a, const Program *p, const Geom *g, const Temp *t, bool at_peak) {
    const Buf *b = t->b;
    double x = g->left + t->first * g->kw, y = g->top + (double)t->off * g->ys;
    double w = (t->last - t->first + 1) * g->kw, h = (double)t->size * g->ys;
    fputs("<rect class=temp data-name=\"", f);
    esc(f, b->name);
    fprintf(f, "\" data-first=%d data-last=%d data-offset=%lld data-bytes=%lld x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
               "height=\"%.2f\" fill=\"hsl(%d,55%%,%d%%)\" stroke=\"#fff\" stroke-width=\"0.5\"><title>",
            t->first, t->last, (long long)t->off, (long long)t->size, x, y, w, h < 0.5 ? 0.5 : h, hue(b->name),
            at_peak ? 55 : 72);
    esc(f, arena_printf(a, "%s  %s %s  %lld bytes at offset %lld, kernels %d..%d (%s .. %s)", b->name,
                        dtype_name(b->dtype), shape_str(a, b), (long long)t->size, (long long)t->off, t->first,
                        t->last, p->kernels[t->first]->name, p->kernels[t->last]->name));
    fputs("</title></rect>\n", f);
    int chars = (int)((w - 6) / 6.2), len = (int)strlen(b->name);   /* about 6 px a character */
    if (h < 13 || chars < 4) return;
    fprintf(f, "<text class=lbl x=\"%.2f\" y=\"%.2f\">", x + 3, y + 12);
    esc(f, len <= chars ? b->name : arena_printf(a, "%.*s..", chars - 2, b->name));
    fputs("</text>\n", f);
}

static void draw_arena(FILE *f, Arena *a, const Program *p, const Plan *pl) {
    int64_t bytes_max = p->arena_size > pl->top ? p->arena_size : pl->top;
    Geom g = {84, 20, pl->nk * 6 > 1040 ? pl->nk * 6 : 1040, 420, 0, 0};
    g.kw = g.w / pl->nk;
    g.ys = g.h / (double)bytes_max;
    double wsvg = g.left + g.w + 10, hsvg = g.top + g.h + 40;
    /* a picture of few kernels shrinks to the page's width; one of many scrolls */
    fprintf(f, "<div id=info>&nbsp;</div><div style=\"overflow-x:auto\"><svg id=arena-svg "
               "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\"%s>\n",
            wsvg, hsvg, wsvg, hsvg, g.w <= 1040 ? " style=\"width:100%;height:auto\"" : "");
    draw_axes(f, a, p, &g, bytes_max);
    for (int i = 0; i < pl->nt; i++)
        draw_temp(f, a, p, &g, &pl->t[i], pl->t[i].first <= pl->peak && pl->peak <= pl->t[i].last);
    double lby = g.top + (double)pl->lb * g.ys;
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.2f\" y2=\"%.2f\" stroke=\"#333\" stroke-dasharray=\"5,4\">"
               "<title>lower bound %lld bytes</title></line>\n",
            g.left, g.left + g.w, lby, lby, (long long)pl->lb);
    fprintf(f, "<rect id=peak-mark x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"none\" stroke=\"#d00\" "
               "stroke-width=\"1.5\"><title>peak: %lld bytes at kernel %d</title></rect>\n</svg></div>\n",
            g.left + pl->peak * g.kw, g.top, g.kw, g.h, (long long)pl->top, pl->peak);
}

static void write_arena(FILE *f, Report *r) {
    Arena *a = r->a;
    const Program *p = r->p;
    Plan pl = arena_plan(a, p);
    fputs("<h2>Arena plan</h2>\n", f);
    fprintf(f, "<p>Each rectangle is a temporary: across, the kernels during which it is live (from the "
               "first kernel that touches it to the last); down, its bytes in the arena. The arena is "
               "<b id=arena-size data-value=%lld>%s</b>; the highest byte in use is reached at kernel "
               "<b>", (long long)p->arena_size, human(a, p->arena_size));
    esc(f, pl.nk ? p->kernels[pl.peak]->name : "-");
    fprintf(f, "</b> (<span id=peak data-value=%lld data-kernel=%d>%s</span>, the red frame). The lower bound "
               "(dashed) is the largest sum of the temporaries live at one kernel, <span id=lower-bound "
               "data-value=%lld data-kernel=%d>%s</span> at kernel <b>",
            (long long)pl.top, pl.peak, human(a, pl.top), (long long)pl.lb, pl.lbk, human(a, pl.lb));
    esc(f, pl.nk ? p->kernels[pl.lbk]->name : "-");
    fprintf(f, "</b>: no plan that keeps these live ranges can use less%s. Hover over a rectangle for its "
               "name, shape and type.</p>\n",
            pl.lb < pl.top ? arena_printf(a, "; this one uses %.0f%% more", 100.0 * (double)(pl.top - pl.lb) / (double)pl.lb) : "");
    if (!pl.nt) {
        fputs("<p class=muted>No temporaries: the model needs no arena.</p>\n", f);
        return;
    }
    draw_arena(f, a, p, &pl);
    fputs("<p>Live at the peak (these set the arena size):</p>\n<table id=peak-tensors><tr><th>tensor</th>"
          "<th>dtype</th><th>shape</th><th class=num>bytes</th><th class=num>offset</th><th>kernels</th></tr>\n", f);
    for (int i = 0; i < pl.nt; i++) {
        const Temp *t = &pl.t[i];
        if (t->first > pl.peak || pl.peak > t->last) continue;
        fputs("<tr class=s><td>", f);
        esc(f, t->b->name);
        fprintf(f, "</td><td>%s</td><td>%s</td><td class=num>%lld</td><td class=num>%lld</td><td>%d..%d</td></tr>\n",
                dtype_name(t->b->dtype), shape_str(a, t->b), (long long)t->size, (long long)t->off, t->first, t->last);
    }
    fputs("</table>\n", f);
}

/* ---- bars ---- */

typedef struct Bar {
    const char *name, *note;
    double v;
    double pct;                     /* a second bar, 0..100 (% of peak), or -1: none */
} Bar;

static int by_v(const void *x, const void *y) {
    const Bar *a = x, *b = y;
    return (a->v < b->v) - (a->v > b->v);
}

/* A table of bars, largest first: name and note, value, share of the total, a bar, and where
 * any row has one, a second bar for pct (bench's % of peak). */
static void bars(FILE *f, Arena *a, const char *id, const char *unit, Bar *b, int n, const char *cls) {
    qsort(b, (size_t)n, sizeof *b, by_v);
    double total = 0;
    bool pct = false;
    for (int i = 0; i < n; i++) total += b[i].v, pct |= b[i].pct >= 0;
    fprintf(f, "<table id=\"%s\"><tr><th>name</th><th class=num>%s</th><th class=num>share</th><th></th>%s</tr>\n", id,
            unit, pct ? "<th class=num>% of peak</th><th></th>" : "");
    int shown = n > BAR_ROWS ? BAR_ROWS : n;
    for (int i = 0; i < shown; i++) {
        fputs("<tr class=\"s bar-row\" data-name=\"", f);
        esc(f, b[i].name);
        fprintf(f, "\" data-value=\"%.6g\"><td>", b[i].v);
        esc(f, b[i].name);
        if (b[i].note) {
            fputs(" <span class=muted>", f);
            esc(f, b[i].note);
            fputs("</span>", f);
        }
        fprintf(f, "</td><td class=num>%s</td><td class=num>%.1f%%</td><td><span class=\"bar %s\" style=\"width:%.0fpx\">"
                   "</span></td>",
                strcmp(unit, "us/run") != 0 ? arena_printf(a, "%.0f", b[i].v) : arena_printf(a, "%.2f", b[i].v),
                total > 0 ? 100 * b[i].v / total : 0, cls, b[0].v > 0 ? 300 * b[i].v / b[0].v : 0);
        if (pct && b[i].pct >= 0)
            fprintf(f, "<td class=num>%.1f%%</td><td><span class=bar style=\"width:%.0fpx\"></span></td>", b[i].pct,
                    b[i].pct > 100 ? 100.0 : b[i].pct);
        else if (pct) fputs("<td class=num>-</td><td></td>", f);
        fputs("</tr>\n", f);
    }
    if (n > shown) {
        double rest = 0;
        for (int i = shown; i < n; i++) rest += b[i].v;
        fprintf(f, "<tr><td class=muted>(%d more)</td><td class=num>%.0f</td><td class=num>%.1f%%</td><td></td></tr>\n",
                n - shown, rest, total > 0 ? 100 * rest / total : 0);
    }
    fputs("</table>\n", f);
}

static void write_flash(FILE *f, Report *r) {
    Arena *a = r->a;
    const Program *p = r->p;
    Bar *w = ARENA_ARRAY(a, Bar, p->nbufs + 1), *k = ARENA_ARRAY(a, Bar, p->nkernels + 1);
    int nw = 0, nk = 0;
    bool *used = used_bufs(a, p);
    for (int i = 0; i < p->nbufs; i++) {
        const Buf *b = p->bufs[i];
        if (is_weight(b, used))
            w[nw++] = (Bar){b->name, arena_printf(a, "%s %s", dtype_name(b->dtype), shape_str(a, b)), (double)kir_nbytes(b), -1};
    }
    for (int i = 0; i < p->nkernels; i++) {
        const Kernel *kk = p->kernels[i];
        double s = 0;
        for (int j = 0; j < kk->nparams; j++) {
            const Buf *b = kir_root(kk->params[j]);
            bool seen = false;       /* a weight passed twice (through views) counts once */
            for (int l = 0; l < j; l++) seen |= kir_root(kk->params[l]) == b;
            if (b->kind == B_CONST && !seen) s += (double)kir_nbytes(b);
        }
        if (s > 0) k[nk++] = (Bar){kk->name, kk->ops, s, -1};
    }
    fputs("<h2>Flash</h2>\n<p>The constant tensors (weights) as the kernel IR holds them, largest first; "
          "the object's code and small tables make up the rest of the flash in the summary.", f);
    if (p->weights_size) fputs(" Here they are outside the flash (--weights-section or --emit-weights).", f);
    fputs("</p>\n<div class=cols><div><h3>By weight tensor</h3>\n", f);
    bars(f, a, "flash-weights", "bytes", w, nw, "");
    fputs("</div><div><h3>By kernel</h3>\n<p class=muted>the weights each kernel reads (a tensor read by "
          "several kernels counts for each)</p>\n", f);
    bars(f, a, "flash-kernels", "bytes", k, nk, "bar2");
    fputs("</div></div>\n", f);
}

static void write_times(FILE *f, Report *r) {
    Arena *a = r->a;
    const Program *p = r->p;
    Bar *b = ARENA_ARRAY(a, Bar, p->nkernels + 1);
    int n = 0;
    for (int i = 0; i < p->nkernels; i++) {
        const Kernel *k = p->kernels[i];
        if (k->ctl) continue;
        int64_t macs, bytes;
        kir_kernel_work(p, i, &macs, &bytes);
        double us = r->us[i], gf = us > 0 ? 2.0 * (double)macs / us / 1e3 : 0;
        bool flops = macs > 0 && us > 0;
        const char *note = flops ? arena_printf(a, "%s, %.2f GFLOP/s", k->ops, gf)
                           : us > 0 && bytes > 0 ? arena_printf(a, "%s, %.2f GB/s", k->ops, (double)bytes / us / 1e3)
                                                 : k->ops;
        b[n++] = (Bar){k->name, note, us, flops && r->peak_gflops > 0 ? 100 * gf / r->peak_gflops : -1};
    }
    fputs("<h2>Time per kernel</h2>\n<p>From <code>onnxcc bench</code>'s instrumented build: microseconds per "
          "run, share of the counted time, and the rate against this core's measured multiply-add peak.</p>\n", f);
    bars(f, a, "times", "us/run", b, n, "bar2");
}

/* --report-counts: instructions per kernel, and per multiply-accumulate where it has any. */
static void write_counts(FILE *f, Report *r) {
    Arena *a = r->a;
    const Program *p = r->p;
    Bar *b = ARENA_ARRAY(a, Bar, r->ncounts + 1);
    int n = 0;
    int64_t total = 0, tmacs = 0;
    for (int i = 0; i < r->ncounts; i++) {
        const Kernel *k = NULL;
        for (int j = 0; j < p->nkernels && !k; j++)
            if (strcmp(p->kernels[j]->name, r->counts[i].name) == 0) k = p->kernels[j];
        const char *note = r->counts[i].macs > 0
                               ? arena_printf(a, "%s, %lld MACs, %.2f instructions/MAC", k ? k->ops : "not a kernel of this build",
                                              (long long)r->counts[i].macs, (double)r->counts[i].insns / (double)r->counts[i].macs)
                               : (k ? k->ops : "not a kernel of this build");
        b[n++] = (Bar){r->counts[i].name, note, (double)r->counts[i].insns, -1};
        total += r->counts[i].insns;
        tmacs = sat_add(tmacs, r->counts[i].macs);
    }
    fputs("<h2>Instructions per kernel</h2>\n<p>From a firmware run of a <code>--profile</code> build (", f);
    esc(f, r->counts_path);
    fprintf(f, "): <span id=count-insns data-value=%lld>%lld</span> instructions in the kernels, %s per "
               "multiply-accumulate over the whole run.</p>\n",
            (long long)total, (long long)total, tmacs ? arena_printf(a, "%.2f", (double)total / (double)tmacs) : "-");
    bars(f, a, "insns", "instructions", b, n, "bar2");
}

void report_write(Report *r) {
    if (!r->p) die("report_write: no program");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die("out of memory");
    const Program *p = r->p;
    fputs("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>onnxcc report: ", f);
    esc(f, p->name);
    fprintf(f, "</title><style>%s</style></head><body>\n<h1>onnxcc report: ", css);
    esc(f, p->name);
    fprintf(f, "</h1><div class=muted>onnxcc %s", r->command);
    fputs(" &middot; ", f);
    esc(f, r->model);
    fputs("</div>\n", f);
    write_summary(f, r, be_macs(p));
    write_kernels(f, r);
    write_arena(f, r);
    write_flash(f, r);
    if (r->us) write_times(f, r);
    if (r->ncounts) write_counts(f, r);
    fprintf(f, "<script>%s</script>\n</body></html>\n", script);
    if (fclose(f) != 0) die("out of memory");
    out_register(r->path);
    out_write(r->path, buf, len);
    free(buf);
}
