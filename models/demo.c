/* demo.c - the example application: classify a few 8x8 handwritten digits with the model that
 * onnxcc compiled from models/example/model.onnx (see models/run-example.sh, `make run`).
 * It shows the whole contract of a compiled model: include its header, give it one static
 * arena of example_ARENA_SIZE bytes aligned to example_ARENA_ALIGN, call example_run with
 * arrays of input and output pointers. No allocation, no runtime library, no libm. */
#include <stdio.h>
#include "example.h"
#include "samples.h"

/* 64 bytes is the most any target asks for; checked here and against the run-time info. */
_Static_assert(example_ARENA_ALIGN <= 64, "the arena below is aligned to 64 bytes only");
static _Alignas(64) unsigned char arena[example_ARENA_SIZE > 0 ? example_ARENA_SIZE : 1];

/* The model's description must match what this program was written for: one 1x1x8x8 image in,
 * ten class probabilities out. */
static int check_info(const onnxcc_model_info *info)
{
    if (info->arena_align > 64 || info->arena_size != example_ARENA_SIZE) {
        fprintf(stderr, "demo: arena: size %lu, alignment %lu unexpected\n",
                (unsigned long)info->arena_size, (unsigned long)info->arena_align);
        return 1;
    }
    if (info->num_inputs != 1 || info->num_outputs != 1 || info->inputs[0].rank != 4 ||
        info->inputs[0].dims[2] != 8 || info->inputs[0].dims[3] != 8 ||
        info->outputs[0].rank != 2 || info->outputs[0].dims[1] != 10) {
        fprintf(stderr, "demo: the model's inputs/outputs are not 1x1x8x8 -> 1x10\n");
        return 1;
    }
    return 0;
}

int main(void)
{
    const onnxcc_model_info *info = &example_info;
    if (check_info(info))
        return 1;
    int right = 0;
    for (int s = 0; s < EXAMPLE_NUM_SAMPLES; s++) {
        float probs[10];
        const void *inputs[1] = {example_samples[s]};
        void *outputs[1] = {probs};
        if (example_run(inputs, outputs, arena) != 0) {
            fprintf(stderr, "demo: example_run failed on sample %d\n", s);
            return 1;
        }
        int best = 0;
        for (int k = 1; k < 10; k++)
            if (probs[k] > probs[best])
                best = k;
        right += best == example_labels[s];
        printf("sample %d: predicted %d (p = %.3f), true %d%s\n", s, best, (double)probs[best],
               example_labels[s], best == example_labels[s] ? "" : "  <- wrong");
    }
    printf("accuracy: %d/%d\n", right, EXAMPLE_NUM_SAMPLES);
    printf("arena: %lu bytes (alignment %lu)\n", (unsigned long)info->arena_size,
           (unsigned long)info->arena_align);
    /* The numpy reference (models/gen_models.py) classifies every sample right, so a miss here
     * means a miscompiled model, not a weak one. */
    if (right != EXAMPLE_NUM_SAMPLES) {
        fprintf(stderr, "demo: %d samples misclassified\n", EXAMPLE_NUM_SAMPLES - right);
        return 1;
    }
    return 0;
}
