/* str_contract.c - tests/models.sh links models/text (StringNormalizer and Cast from string)
 * into this program and checks the header's contract for string tensors as a user's program
 * sees it (runtime/model.h.in, "Strings"): char[text_STRLEN] per element, NUL-padded, dtype 8
 * and the ONNX shape in the info struct, the kept words packed at the start of their buffer
 * with their count in kept.dims and the rest zeroed, a string filling its whole capacity (no
 * NUL), and numbers read from text. The expected values are written here from the ONNX
 * definitions. Prints "ok ..." or "FAIL ..." per check. */
#include <stdio.h>
#include <string.h>

#include "text.h"

static int failures;

static void verdict(int ok, const char *what)
{
    printf("%s text: %s\n", ok ? "ok  " : "FAIL", what);
    failures += !ok;
}

/* string i of a packed tensor equals s (and is NUL-padded to the capacity) */
static int is(char (*t)[text_STRLEN], int i, const char *s)
{
    size_t n = strlen(s);
    if (memcmp(t[i], s, n) != 0) return 0;
    for (size_t j = n; j < text_STRLEN; j++)
        if (t[i][j]) return 0;
    return 1;
}

static void put(char (*t)[text_STRLEN], int i, const char *s)
{
    memset(t[i], 0, text_STRLEN);
    memcpy(t[i], s, strlen(s) < text_STRLEN ? strlen(s) : text_STRLEN);
}

int main(void)
{
    static _Alignas(text_ARENA_ALIGN) unsigned char arena[text_ARENA_SIZE + 1];
    static char words[6][text_STRLEN], numbers[4][text_STRLEN], kept[6][text_STRLEN];
    float values[4];
    int64_t dims[1];
    const onnxcc_model_info *m = &text_info;
    verdict(text_STRLEN == 32 && text_INPUT_0_DTYPE == 8 && text_INPUT_0_RANK == 1 && text_INPUT_0_NUMEL == 6 &&
                text_INPUT_0_SIZE == 6 * text_STRLEN && text_INPUT_1_RANK == 2 && text_INPUT_1_SIZE == 4 * text_STRLEN,
            "macros: a string tensor is NUMEL elements of STRLEN bytes");
    verdict(m->inputs[0].dtype == 8 && m->inputs[0].rank == 1 && m->inputs[0].dims[0] == 6 &&
                m->inputs[0].size == sizeof words && m->outputs[0].dtype == 8 && m->outputs[0].dims_output == 2 &&
                m->outputs[0].size == sizeof kept && m->outputs[1].dtype == 1,
            "info: dtype 8, the ONNX shape, sizes in bytes");
    const char *in[6] = {"The", "QUICK", "a", "fox", "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyY", "tHE"};
    for (int i = 0; i < 6; i++) put(words, i, in[i]);
    memset(words[3] + 4, 'x', text_STRLEN - 4);     /* bytes after a string's NUL are not read */
    const char *num[4] = {"2.5", "-1e2", "nan", "0.001"};
    for (int i = 0; i < 4; i++) put(numbers, i, num[i]);
    memset(kept, 0xab, sizeof kept);
    int rc = text_run_typed(words[0], numbers[0], kept[0], values, dims, arena);
    verdict(rc == text_OK, "run returns 0");
    verdict(dims[0] == 3, "three words are kept (kept.dims)");
    verdict(is(kept, 0, "quick") && is(kept, 1, "fox"), "kept words lower-cased, NUL-padded, in order");
    verdict(memcmp(kept[2], "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy", text_STRLEN) == 0,
            "a string of the whole capacity (no NUL) is read and written whole");
    int zero = 1;
    for (int i = 3; i < 6; i++)
        for (int j = 0; j < text_STRLEN; j++) zero &= kept[i][j] == 0;
    verdict(zero, "the rest of the capacity is zero");
    verdict(values[0] == 2.5f && values[1] == -100.0f && values[2] != values[2] && values[3] == 0.001f,
            "numbers read from text (2.5, -1e2, nan, 0.001)");
    for (int i = 0; i < 6; i++) put(words, i, i % 2 ? "A" : "the");
    rc = text_run_typed(words[0], numbers[0], kept[0], values, dims, arena);
    verdict(rc == text_OK && dims[0] == 1 && is(kept, 0, ""), "all removed: one empty string");
    return failures != 0;
}
