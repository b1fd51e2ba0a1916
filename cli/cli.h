/* cli.h - what the two commands of the driver share: `onnxcc` (cli/main.c) compiles a model,
 * `onnxcc check` (cli/check.c) compiles it for the host and runs it on ONNX test data. */
#ifndef ONNXCC_CLI_H
#define ONNXCC_CLI_H
#include "../backend/backend.h"
#include "../frontend/frontend.h"
#include "../passes/pipeline.h"

typedef struct Cli {
    Options o;
    const char *model, *out, *name;
    const char *run_pass;           /* --run-pass=PASS,...: the model is a .kir text */
    const char *triple, *cpu, *features, *abi;
    EmitKind emit;
    double rtol, atol;
    const char **dirs;              /* check: data set directories given on the command line */
    int ndirs;
} Cli;

/* A C identifier from a path's base name without extension: "models/my-net.onnx" -> "my_net". */
const char *cli_identifier(Arena *a, const char *path);
/* Fill the options that come from the target, then run the whole pipeline. */
Program *cli_compile(Graph *g, Cli *c, const Target *t);
/* `onnxcc check`: returns the exit status. */
int check_main(Arena *a, Cli *c);

#endif
