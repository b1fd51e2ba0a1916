/* elf.c - relocatable ELF64 objects joined without a linker (be_elf_join).
 *
 * Two uses, both to keep work out of LLVM's code generator on the host:
 *   - the weights: LLVM's object writer copies constant data a byte run at a time through its
 *     assembler (VGG-16's 730 MB took 6.4 s of its 8 s), so the large constants leave the
 *     module (emit.c, blob mode): the kernels address them as one external symbol plus an
 *     offset, and the join adds a section that holds their bytes and defines that symbol;
 *   - the kernels: split over modules compiled on threads of their own (emit.c), whose
 *     objects the join makes one.
 * The result is what `ld -r` would make of the inputs for the objects LLVM writes for x86-64
 * ELF: every input section kept as a section of its own (a relocatable object may hold several
 * of one name; the final link places them as it would sections of several objects), the
 * symbol tables joined (the locals first, as ELF requires), each undefined symbol that another
 * input (or the blob) defines bound to that definition, the relocations renumbered. The
 * symbols named in `hide` (the functions one module calls in another, and the blob) become
 * local, so that the object exports what a single module's would. Inputs with anything else
 * (section groups, link-order sections, REL relocations, extended section numbering) are
 * refused before anything is written: be_elf_join returns false, and emit.c, which joins
 * only the objects LLVM writes for x86-64 ELF (none of those), stops with an internal error. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifndef SHT_LLVM_ADDRSIG
#define SHT_LLVM_ADDRSIG 0x6fff4c03
#endif

typedef struct In {
    const unsigned char *o;
    size_t size;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    int nsh, symtab;
    const Elf64_Sym *sym;
    int nsym;
    const char *symstr, *shstr;
    size_t symstr_size, shstr_size;
    int *smap;                      /* section index -> output index (0: dropped) */
    int *ymap;                      /* symbol index -> output index */
} In;

typedef struct Strs {
    char *s;
    size_t n, cap;
} Strs;

static size_t str_add(Strs *t, const char *s) {
    size_t len = strlen(s) + 1;
    if (t->n + len > t->cap) {
        t->cap = (t->n + len) * 2 + 256;
        t->s = realloc(t->s, t->cap);
        if (!t->s) die("out of memory");
    }
    memcpy(t->s + t->n, s, len);
    t->n += len;
    return t->n - len;
}

static bool parse(In *in) {
    if (in->size < sizeof(Elf64_Ehdr)) return false;
    in->eh = (const Elf64_Ehdr *)in->o;
    const Elf64_Ehdr *eh = in->eh;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_type != ET_REL || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shnum == 0 || eh->e_shstrndx >= eh->e_shnum || eh->e_shoff > in->size ||
        (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > in->size - eh->e_shoff || eh->e_shoff % 8)
        return false;
    in->sh = (const Elf64_Shdr *)(in->o + eh->e_shoff);
    in->nsh = eh->e_shnum;
    in->symtab = -1;
    for (int i = 1; i < in->nsh; i++) {
        const Elf64_Shdr *s = &in->sh[i];
        if (s->sh_type != SHT_NOBITS && (s->sh_offset > in->size || s->sh_size > in->size - s->sh_offset)) return false;
        if (s->sh_flags & (SHF_LINK_ORDER | SHF_GROUP)) return false;
        switch (s->sh_type) {
        case SHT_PROGBITS: case SHT_NOBITS: case SHT_NOTE: case SHT_INIT_ARRAY: case SHT_FINI_ARRAY:
        case SHT_STRTAB: case SHT_LLVM_ADDRSIG: break;
        case SHT_RELA:
            if (s->sh_entsize != sizeof(Elf64_Rela) || s->sh_info == 0 || s->sh_info >= (unsigned)in->nsh) return false;
            break;
        case SHT_SYMTAB:
            if (in->symtab >= 0 || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= (unsigned)in->nsh) return false;
            in->symtab = i;
            break;
        default: return false;
        }
    }
    if (in->symtab < 0) return false;
    const Elf64_Shdr *st = &in->sh[in->symtab], *ss = &in->sh[st->sh_link], *hs = &in->sh[eh->e_shstrndx];
    if (ss->sh_type != SHT_STRTAB || hs->sh_type != SHT_STRTAB || ss->sh_size == 0 || hs->sh_size == 0 ||
        in->o[ss->sh_offset + ss->sh_size - 1] || in->o[hs->sh_offset + hs->sh_size - 1] || st->sh_offset % 8)
        return false;
    in->sym = (const Elf64_Sym *)(in->o + st->sh_offset);
    in->nsym = (int)(st->sh_size / sizeof(Elf64_Sym));
    in->symstr = (const char *)in->o + ss->sh_offset, in->symstr_size = ss->sh_size;
    in->shstr = (const char *)in->o + hs->sh_offset, in->shstr_size = hs->sh_size;
    for (int j = 0; j < in->nsym; j++)
        if (in->sym[j].st_name >= in->symstr_size || in->sym[j].st_shndx == SHN_XINDEX) return false;
    for (int i = 0; i < in->nsh; i++)
        if (in->sh[i].sh_name >= in->shstr_size) return false;
    return true;
}

static const char *sym_name(const In *in, int j) { return in->symstr + in->sym[j].st_name; }

static bool hidden_name(const char *name, const char *const *hide, int nhide) {
    for (int i = 0; i < nhide; i++)
        if (!strcmp(name, hide[i])) return true;
    return false;
}

/* The output symbol table under construction. */
typedef struct Syms {
    Elf64_Sym *s;
    const char **name;
    int n, cap;
} Syms;

static int sym_add(Syms *y, Elf64_Sym s, const char *name) {
    if (y->n == y->cap) {
        y->cap = y->cap ? 2 * y->cap : 256;
        y->s = realloc(y->s, sizeof *y->s * (size_t)y->cap);
        y->name = realloc(y->name, sizeof *y->name * (size_t)y->cap);
        if (!y->s || !y->name) die("out of memory");
    }
    y->s[y->n] = s, y->name[y->n] = name;
    return y->n++;
}

static size_t align_up(size_t v, size_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

/* The output's section headers under construction: by output index, the header, the input
 * header it copies (NULL: made here) and that input's number. */
typedef struct Secs {
    Elf64_Shdr *sh;
    const Elf64_Shdr **from;
    int *from_in;
    int n;
    Strs names;
} Secs;

/* Input section s of input i (ins[i] = in) as the next output section; its index. */
static int sec_take(Secs *o, In *in, int i, int s) {
    int k = o->n++;
    in->smap[s] = k;
    o->from[k] = &in->sh[s], o->from_in[k] = i;
    o->sh[k] = in->sh[s];
    o->sh[k].sh_name = (Elf64_Word)str_add(&o->names, in->shstr + in->sh[s].sh_name);
    return k;
}

bool be_elf_join(const ElfPart *parts, int nparts, const ElfBlob *blob, const char *const *hide, int nhide,
                 const ElfSink *sink) {
    In *ins = calloc((size_t)nparts, sizeof *ins);
    if (!ins) die("out of memory");
    bool ok = false;
    Syms y = {0};
    Strs symstr = {0};
    Secs o = {.n = 1};
    int total_in = 0;
    for (int i = 0; i < nparts; i++) {
        ins[i].o = parts[i].data, ins[i].size = parts[i].size;
        if (!parse(&ins[i])) goto done;
        if (i && ins[i].eh->e_machine != ins[0].eh->e_machine) goto done;
        ins[i].smap = calloc((size_t)ins[i].nsh, sizeof(int));
        ins[i].ymap = calloc((size_t)ins[i].nsym, sizeof(int));
        if (!ins[i].smap || !ins[i].ymap) die("out of memory");
        total_in += ins[i].nsh;
    }
    int cap = total_in + 8;
    o.sh = calloc((size_t)cap, sizeof *o.sh);
    o.from = calloc((size_t)cap, sizeof *o.from);
    o.from_in = calloc((size_t)cap, sizeof *o.from_in);
    if (!o.sh || !o.from || !o.from_in) die("out of memory");
    str_add(&o.names, "");
    str_add(&symstr, "");

    /* sections: each input's contents, the blob, each input's relocations, then the tables */
    for (int i = 0; i < nparts; i++) {
        In *in = &ins[i];
        for (int s = 1; s < in->nsh; s++) {
            unsigned t = in->sh[s].sh_type;
            if (t != SHT_SYMTAB && t != SHT_STRTAB && t != SHT_RELA && t != SHT_LLVM_ADDRSIG) sec_take(&o, in, i, s);
        }
    }
    int blob_sec = 0;
    if (blob) {
        blob_sec = o.n++;
        o.sh[blob_sec] = (Elf64_Shdr){.sh_name = (Elf64_Word)str_add(&o.names, blob->section), .sh_type = SHT_PROGBITS,
                                     .sh_flags = SHF_ALLOC, .sh_size = blob->size, .sh_addralign = blob->align};
    }
    for (int i = 0; i < nparts; i++) {
        In *in = &ins[i];
        for (int s = 1; s < in->nsh; s++) {
            if (in->sh[s].sh_type != SHT_RELA) continue;
            if (!in->smap[in->sh[s].sh_info]) goto done;   /* relocations of a dropped section */
            o.sh[sec_take(&o, in, i, s)].sh_info = (Elf64_Word)in->smap[in->sh[s].sh_info];
        }
    }
    int symtab_sec = o.n++, symstr_sec = o.n++, shstr_sec = o.n++;
    if (o.n >= SHN_LORESERVE) goto done;

    /* symbols: the null one, every input's locals, the hidden definitions (now local), then
     * the globals; an undefined symbol takes the index of its definition where there is one */
    sym_add(&y, (Elf64_Sym){0}, "");
    for (int i = 0; i < nparts; i++) {
        In *in = &ins[i];
        for (int j = 1; j < in->nsym; j++) {
            Elf64_Sym s = in->sym[j];
            if (ELF64_ST_BIND(s.st_info) != STB_LOCAL) continue;
            if (s.st_shndx != SHN_UNDEF && s.st_shndx < SHN_LORESERVE) {
                if (s.st_shndx >= in->nsh || !in->smap[s.st_shndx]) {
                    /* a section symbol of a dropped section (the address-significance
                     * table's): nothing refers to it once that table is gone */
                    if (ELF64_ST_TYPE(s.st_info) == STT_SECTION) continue;
                    goto done;
                }
                s.st_shndx = (Elf64_Section)in->smap[s.st_shndx];
            }
            in->ymap[j] = sym_add(&y, s, sym_name(in, j));
        }
    }
    int first_def = y.n;
    if (blob)
        sym_add(&y, (Elf64_Sym){.st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT),
                               .st_shndx = (Elf64_Section)blob_sec, .st_size = blob->size}, blob->symbol);
    for (int pass = 0; pass < 2; pass++) {      /* 0: hidden definitions, 1: the other definitions */
        for (int i = 0; i < nparts; i++) {
            In *in = &ins[i];
            for (int j = 1; j < in->nsym; j++) {
                Elf64_Sym s = in->sym[j];
                const char *name = sym_name(in, j);
                if (ELF64_ST_BIND(s.st_info) == STB_LOCAL || s.st_shndx == SHN_UNDEF) continue;
                bool hid = hidden_name(name, hide, nhide);
                if (hid != (pass == 0)) continue;
                for (int k = first_def; k < y.n; k++)   /* one definition of a name */
                    if (!strcmp(y.name[k], name)) goto done;
                if (s.st_shndx < SHN_LORESERVE) {
                    if (s.st_shndx >= in->nsh || !in->smap[s.st_shndx]) goto done;
                    s.st_shndx = (Elf64_Section)in->smap[s.st_shndx];
                }
                if (hid) s.st_info = ELF64_ST_INFO(STB_LOCAL, ELF64_ST_TYPE(s.st_info)), s.st_other = STV_DEFAULT;
                in->ymap[j] = sym_add(&y, s, name);
            }
        }
    }
    int first_global = first_def;
    while (first_global < y.n && ELF64_ST_BIND(y.s[first_global].st_info) == STB_LOCAL) first_global++;
    for (int i = 0; i < nparts; i++) {
        In *in = &ins[i];
        for (int j = 1; j < in->nsym; j++) {
            if (ELF64_ST_BIND(in->sym[j].st_info) == STB_LOCAL || in->sym[j].st_shndx != SHN_UNDEF) continue;
            const char *name = sym_name(in, j);
            int to = 0;
            for (int k = first_def; k < y.n && !to; k++)    /* its definition, or the one kept undefined */
                if (!strcmp(y.name[k], name)) to = k;
            if (!to) {
                if (hidden_name(name, hide, nhide)) goto done;      /* nobody defines it */
                to = sym_add(&y, in->sym[j], name);
            }
            in->ymap[j] = to;
        }
    }
    for (int k = 1; k < y.n; k++) y.s[k].st_name = (Elf64_Word)str_add(&symstr, y.name[k]);

    /* layout */
    o.sh[symtab_sec] = (Elf64_Shdr){.sh_name = (Elf64_Word)str_add(&o.names, ".symtab"), .sh_type = SHT_SYMTAB,
                                   .sh_size = sizeof(Elf64_Sym) * (size_t)y.n, .sh_link = (Elf64_Word)symstr_sec,
                                   .sh_info = (Elf64_Word)first_global, .sh_addralign = 8,
                                   .sh_entsize = sizeof(Elf64_Sym)};
    o.sh[symstr_sec] = (Elf64_Shdr){.sh_name = (Elf64_Word)str_add(&o.names, ".strtab"), .sh_type = SHT_STRTAB,
                                   .sh_size = symstr.n, .sh_addralign = 1};
    o.sh[shstr_sec] = (Elf64_Shdr){.sh_name = (Elf64_Word)str_add(&o.names, ".shstrtab"), .sh_type = SHT_STRTAB,
                                  .sh_addralign = 1};
    o.sh[shstr_sec].sh_size = o.names.n;
    for (int k = 1; k < o.n; k++)
        if (o.sh[k].sh_type == SHT_RELA) o.sh[k].sh_link = (Elf64_Word)symtab_sec;
    size_t at = sizeof(Elf64_Ehdr);
    for (int k = 1; k < o.n; k++) {
        at = align_up(at, o.sh[k].sh_addralign ? o.sh[k].sh_addralign : 1);
        o.sh[k].sh_offset = at;
        if (o.sh[k].sh_type != SHT_NOBITS) at += o.sh[k].sh_size;
    }
    at = align_up(at, 8);
    size_t shoff = at;
    Elf64_Ehdr eh = *ins[0].eh;
    eh.e_shoff = shoff, eh.e_shnum = (Elf64_Half)o.n, eh.e_shstrndx = (Elf64_Half)shstr_sec;
    eh.e_phoff = 0, eh.e_phnum = 0;
    /* the relocations renumbered first: nothing is written if one names a dropped symbol */
    Elf64_Rela **rela = calloc((size_t)o.n, sizeof *rela);
    if (!rela) die("out of memory");
    bool bad = false;
    for (int k = 1; k < o.n && !bad; k++) {
        if (o.sh[k].sh_type != SHT_RELA) continue;
        In *in = &ins[o.from_in[k]];
        size_t nr = o.from[k]->sh_size / sizeof(Elf64_Rela);
        rela[k] = malloc(nr * sizeof(Elf64_Rela) + 1);
        if (!rela[k]) die("out of memory");
        memcpy(rela[k], in->o + o.from[k]->sh_offset, nr * sizeof(Elf64_Rela));
        for (size_t q = 0; q < nr && !bad; q++) {
            unsigned sj = (unsigned)ELF64_R_SYM(rela[k][q].r_info);
            if (sj >= (unsigned)in->nsym || (sj && !in->ymap[sj])) bad = true;
            else rela[k][q].r_info = ELF64_R_INFO((Elf64_Xword)in->ymap[sj], ELF64_R_TYPE(rela[k][q].r_info));
        }
    }
    if (!bad) {
        static const unsigned char zeros[4096];
        size_t pos = 0;
        #define PUT(d, n) (sink->write(sink->ctx, (d), (n)), pos += (n))
        #define PAD(to) while (pos < (to)) PUT(zeros, (to) - pos < sizeof zeros ? (to) - pos : sizeof zeros)
        PUT(&eh, sizeof eh);
        for (int k = 1; k < o.n; k++) {
            if (o.sh[k].sh_type == SHT_NOBITS) continue;
            PAD(o.sh[k].sh_offset);
            if (k == blob_sec) {
                for (int b = 0; b < blob->n; b++) {
                    if (blob->off[b] < 0) continue;
                    PAD(o.sh[k].sh_offset + (size_t)blob->off[b]);
                    PUT(blob->data[b], blob->size_of[b]);
                }
                PAD(o.sh[k].sh_offset + o.sh[k].sh_size);
            } else if (k == symtab_sec) {
                PUT(y.s, o.sh[k].sh_size);
            } else if (k == symstr_sec) {
                PUT(symstr.s, symstr.n);
            } else if (k == shstr_sec) {
                PUT(o.names.s, o.names.n);
            } else if (rela[k]) {
                PUT(rela[k], o.sh[k].sh_size);
            } else {
                PUT(ins[o.from_in[k]].o + o.from[k]->sh_offset, o.sh[k].sh_size);
            }
        }
        PAD(shoff);
        PUT(o.sh, sizeof(Elf64_Shdr) * (size_t)o.n);
        #undef PUT
        #undef PAD
        ok = true;
    }
    for (int k = 0; k < o.n; k++) free(rela[k]);
    free(rela);
done:
    for (int i = 0; i < nparts; i++) free(ins[i].smap), free(ins[i].ymap);
    free(ins);
    free(y.s), free(y.name), free(symstr.s), free(o.names.s);
    free(o.sh), free(o.from), free(o.from_in);
    return ok;
}
