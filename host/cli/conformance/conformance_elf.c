/*
 * Reading a plugin's dynamic symbol table (.dynsym) and its DT_NEEDED
 * entries straight from the ELF file, without loading it. Every offset
 * is bounds-checked: the file may be anything a manifest names.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance.h"

/* The ELF class this kit runs as: a plugin of another class cannot load
 * into it anyway. */
#if __ELF_NATIVE_CLASS == 64
#define NATIVE_CLASS ELFCLASS64
#else
#define NATIVE_CLASS ELFCLASS32
#endif

typedef struct image {
    const uint8_t *data;
    size_t size;
} image;

/* [off, off + len) lies inside the file. */
static int inside(const image *im, uint64_t off, uint64_t len)
{
    return off <= im->size && len <= im->size - off;
}

/* A NUL-terminated string at `off` of a string table. */
static const char *string_at(const image *im, const ElfW(Shdr) * strtab,
                             uint64_t off)
{
    const char *s;

    if (off >= strtab->sh_size ||
        !inside(im, strtab->sh_offset, strtab->sh_size))
        return NULL;
    s = (const char *)im->data + strtab->sh_offset + off;
    if (memchr(s, '\0', strtab->sh_size - off) == NULL)
        return NULL;
    return s;
}

static int push(char ***list, size_t *count, const char *s)
{
    char **grown = realloc(*list, (*count + 1) * sizeof(*grown));

    if (grown == NULL)
        return -1;
    *list = grown;
    if ((grown[*count] = strdup(s)) == NULL)
        return -1;
    (*count)++;
    return 0;
}

/* Section header `index` copied out (the file need not be aligned);
 * 0 when there is no such section. */
static int section(const image *im, const ElfW(Ehdr) * eh, uint32_t index,
                   ElfW(Shdr) * out)
{
    if (index == 0 || index >= eh->e_shnum)
        return 0;
    memcpy(out, im->data + eh->e_shoff + (uint64_t)index * eh->e_shentsize,
           sizeof(*out));
    return 1;
}

static int read_dynsym(const image *im, const ElfW(Ehdr) * eh,
                       const ElfW(Shdr) * sh, conf_elf *elf, char *err,
                       size_t cap)
{
    ElfW(Shdr) strtab_header, *strtab = &strtab_header;
    uint64_t count;

    if (sh->sh_entsize != sizeof(ElfW(Sym)) ||
        !section(im, eh, sh->sh_link, strtab) ||
        !inside(im, sh->sh_offset, sh->sh_size)) {
        snprintf(err, cap, "malformed .dynsym section");
        return -1;
    }
    count = sh->sh_size / sizeof(ElfW(Sym));
    for (uint64_t i = 1; i < count; i++) {
        ElfW(Sym) entry, *sym = &entry;
        unsigned bind, type, vis;
        const char *name;

        memcpy(sym, im->data + sh->sh_offset + i * sizeof(ElfW(Sym)),
               sizeof(*sym));
        bind = ELF64_ST_BIND(sym->st_info);
        type = ELF64_ST_TYPE(sym->st_info);
        vis = ELF64_ST_VISIBILITY(sym->st_other);
        name = string_at(im, strtab, sym->st_name);

        if (name == NULL) {
            snprintf(err, cap, "malformed .dynsym: symbol %llu has no name",
                     (unsigned long long)i);
            return -1;
        }
        if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)
            continue;
        if (sym->st_shndx == SHN_UNDEF) {
            if (bind != STB_WEAK &&
                push(&elf->undefined, &elf->undefined_count, name) != 0)
                goto nomem;
            continue;
        }
        if (vis == STV_HIDDEN || vis == STV_INTERNAL)
            continue;
        /* symbol-version nodes (ABS, value 0, untyped or object) */
        if (sym->st_shndx == SHN_ABS && sym->st_value == 0 &&
            (type == STT_NOTYPE || type == STT_OBJECT) && sym->st_size == 0)
            continue;
        if (push(&elf->exported, &elf->exported_count, name) != 0)
            goto nomem;
    }
    return 0;
nomem:
    snprintf(err, cap, "out of memory");
    return -1;
}

static int read_dynamic(const image *im, const ElfW(Ehdr) * eh,
                        const ElfW(Shdr) * sh, conf_elf *elf, char *err,
                        size_t cap)
{
    ElfW(Shdr) strtab_header, *strtab = &strtab_header;
    uint64_t count;

    if (!section(im, eh, sh->sh_link, strtab) ||
        !inside(im, sh->sh_offset, sh->sh_size)) {
        snprintf(err, cap, "malformed .dynamic section");
        return -1;
    }
    count = sh->sh_size / sizeof(ElfW(Dyn));
    for (uint64_t i = 0; i < count; i++) {
        ElfW(Dyn) entry, *d = &entry;
        const char *name;

        memcpy(d, im->data + sh->sh_offset + i * sizeof(ElfW(Dyn)), sizeof(*d));
        if (d->d_tag == DT_NULL)
            break;
        if (d->d_tag != DT_NEEDED)
            continue;
        name = string_at(im, strtab, d->d_un.d_val);
        if (name == NULL) {
            snprintf(err, cap, "malformed .dynamic: bad DT_NEEDED name");
            return -1;
        }
        if (push(&elf->needed, &elf->needed_count, name) != 0) {
            snprintf(err, cap, "out of memory");
            return -1;
        }
    }
    return 0;
}

static int parse(const image *im, conf_elf *elf, char *err, size_t cap)
{
    ElfW(Ehdr) header, *eh = &header;
    int seen_dynsym = 0;

    if (im->size < EI_NIDENT || memcmp(im->data, ELFMAG, SELFMAG) != 0) {
        snprintf(err, cap, "not an ELF file");
        return -1;
    }
    if (im->size < sizeof(*eh) || im->data[EI_CLASS] != NATIVE_CLASS) {
        snprintf(err, cap, "not a %d-bit ELF file",
                 NATIVE_CLASS == ELFCLASS64 ? 64 : 32);
        return -1;
    }
    memcpy(eh, im->data, sizeof(*eh));
    if (eh->e_type != ET_DYN) {
        snprintf(err, cap, "not a shared library (ELF type %u)", eh->e_type);
        return -1;
    }
    if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
        !inside(im, eh->e_shoff, (uint64_t)eh->e_shnum * eh->e_shentsize)) {
        snprintf(err, cap,
                 "no usable section headers, so no symbol table "
                 "to read");
        return -1;
    }
    for (uint32_t i = 1; i < eh->e_shnum; i++) {
        ElfW(Shdr) sh;
        section(im, eh, i, &sh);
        if (sh.sh_type == SHT_DYNSYM) {
            seen_dynsym = 1;
            if (read_dynsym(im, eh, &sh, elf, err, cap) != 0)
                return -1;
        } else if (sh.sh_type == SHT_DYNAMIC) {
            if (read_dynamic(im, eh, &sh, elf, err, cap) != 0)
                return -1;
        }
    }
    if (!seen_dynsym) {
        snprintf(err, cap, "no dynamic symbol table (.dynsym)");
        return -1;
    }
    return 0;
}

int conf_elf_read(const char *path, conf_elf *elf, char *err, size_t cap)
{
    struct stat st;
    image im;
    void *map;
    int fd, rc;

    memset(elf, 0, sizeof(*elf));
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        snprintf(err, cap, "%s: not a regular, non-empty file", path);
        close(fd);
        return -1;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, cap, "%s: mmap: %s", path, strerror(errno));
        return -1;
    }
    im.data = map;
    im.size = (size_t)st.st_size;
    rc = parse(&im, elf, err, cap);
    munmap(map, (size_t)st.st_size);
    if (rc != 0)
        conf_elf_free(elf);
    return rc;
}

static void free_list(char **list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(list[i]);
    free(list);
}

void conf_elf_free(conf_elf *elf)
{
    free_list(elf->exported, elf->exported_count);
    free_list(elf->undefined, elf->undefined_count);
    free_list(elf->needed, elf->needed_count);
    memset(elf, 0, sizeof(*elf));
}
