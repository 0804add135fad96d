/*
 * porting: the facts a port of st to a new CPU or OS needs.
 *
 * usage: porting [--all]
 *
 * Prints the predefined OS, CPU, ABI and compiler macros; type sizes;
 * byte order; page size; the measured direction of stack growth; the
 * alignment malloc must honour; and, for the CPU it was compiled for, the
 * registers the ABI requires a function (and so a context switch) to
 * preserve. `--all` prints the register table for every CPU st knows.
 * It needs only libc, so it runs under qemu-user as easily as natively.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "st.h"

/* ---- predefined macros ----------------------------------------------------------- */

struct macro {
    const char *name;
    const char *value; /* equal to name when the macro is not defined */
};

/*
 * Stringify after expansion: an undefined name stays itself, so the entry
 * shows whether (and as what) the compiler predefines it.
 */
#define EXPAND_TO_STRING(x) #x
#define TO_STRING(x) EXPAND_TO_STRING(x)
#define MACRO(m) {#m, TO_STRING(m)}

static const struct macro os_macros[] = {
    MACRO(__linux__),   MACRO(__gnu_linux__), MACRO(__GLIBC__), MACRO(__GLIBC_MINOR__),
    MACRO(__APPLE__),   MACRO(__MACH__),      MACRO(__FreeBSD__), MACRO(__NetBSD__),
    MACRO(__OpenBSD__), MACRO(__CYGWIN__),    MACRO(_WIN32),    MACRO(__ANDROID__),
    MACRO(__unix__),
};

static const struct macro compiler_macros[] = {
    MACRO(__GNUC__),        MACRO(__GNUC_MINOR__), MACRO(__clang__), MACRO(__clang_major__),
    MACRO(__STDC_VERSION__), MACRO(__OPTIMIZE__),  MACRO(__PIC__),   MACRO(__PIE__),
    MACRO(__SANITIZE_ADDRESS__),
};

static const struct macro cpu_macros[] = {
    MACRO(__x86_64__),        MACRO(__i386__),           MACRO(__i686__),
    MACRO(__aarch64__),       MACRO(__ARM_ARCH),         MACRO(__arm__),
    MACRO(__thumb__),         MACRO(__thumb2__),         MACRO(__ARM_PCS_VFP),
    MACRO(__SOFTFP__),        MACRO(__ARM_FP),           MACRO(__riscv),
    MACRO(__riscv_xlen),      MACRO(__riscv_flen),       MACRO(__riscv_float_abi_double),
    MACRO(__mips__),          MACRO(__mips),             MACRO(__mips64),
    MACRO(_MIPS_SIM),         MACRO(_ABIO32),            MACRO(_ABIN32),
    MACRO(_ABI64),            MACRO(__mips_hard_float),  MACRO(__mips_fpr),
    MACRO(__mips_isa_rev),    MACRO(__MIPSEB__),         MACRO(__MIPSEL__),
    MACRO(__powerpc__),       MACRO(__powerpc64__),      MACRO(_CALL_ELF),
    MACRO(__LITTLE_ENDIAN__), MACRO(__BIG_ENDIAN__),     MACRO(__s390x__),
    MACRO(__s390__),          MACRO(__loongarch64),      MACRO(__loongarch_grlen),
    MACRO(__loongarch_frlen), MACRO(__sparc__),          MACRO(__LP64__),
    MACRO(__ILP32__),         MACRO(__SIZEOF_POINTER__), MACRO(__BYTE_ORDER__),
    MACRO(__BIGGEST_ALIGNMENT__),
};

static void print_macros(const char *title, const struct macro *m, size_t n)
{
    printf("%s:\n", title);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].name, m[i].value) != 0) {
            printf("  %-26s = %s\n", m[i].name, m[i].value[0] ? m[i].value : "(empty)");
        }
    }
}

/* ---- the callee-saved register table ------------------------------------------------ */

struct abi {
    const char *cpu;       /* st's arch/ directory (Meson cpu_family) */
    const char *abi;
    const char *integer;   /* callee-saved general registers */
    const char *floating;  /* callee-saved floating-point / vector registers */
    const char *control;   /* preserved control/status state */
    const char *sp_ra;     /* stack pointer and where the return address lives */
    int stack_align;       /* bytes, at a call */
};

static const struct abi abis[] = {
    {"x86_64", "System V AMD64", "rbx rbp r12 r13 r14 r15", "none (all xmm are caller-saved)",
     "MXCSR control bits, x87 control word", "rsp; return address pushed by call", 16},
    {"x86", "System V i386 (cdecl)", "ebx esi edi ebp", "none (x87 stack empty at calls)",
     "x87 control word (and MXCSR control bits)", "esp; return address pushed by call", 16},
    {"aarch64", "AAPCS64", "x19-x28, x29 (fp)", "d8-d15 (low 64 bits of v8-v15)",
     "FPCR", "sp; return address in x30 (lr)", 16},
    {"arm", "AAPCS, VFP hard-float (armhf)", "r4-r11 (r9 is v6 on Linux, r11 fp)",
     "d8-d15 (s16-s31)", "FPSCR rounding/exception-control bits", "r13 (sp); return address in r14 (lr)",
     8},
    {"riscv64", "LP64D", "s0-s11 (x8 x9 x18-x27; s0 is fp)", "fs0-fs11 (f8 f9 f18-f27)",
     "none (fcsr has thread storage duration)", "sp (x2); return address in ra (x1)", 16},
    {"mips", "o32 (FR=0)", "s0-s7 ($16-$23), s8/fp ($30), gp ($28, for PIC)",
     "$f20 $f22 $f24 $f26 $f28 $f30 (with their odd halves)", "FCSR rounding bits",
     "sp ($29); return address in ra ($31)", 8},
    {"mips64", "n64", "s0-s7 ($16-$23), s8/fp ($30), gp ($28)", "$f24-$f31",
     "FCSR rounding bits", "sp ($29); return address in ra ($31)", 16},
    {"ppc64", "ELFv2 (ppc64le)", "r14-r31, cr2-cr4 (r2 = TOC, restored by the caller)",
     "f14-f31, v20-v31, vrsave", "FPSCR rounding bits (limited access)",
     "r1 (sp); return address in lr", 16},
    {"s390x", "s390x ELF", "r6-r13", "f8-f15", "FPC rounding bits",
     "r15 (sp); return address in r14", 8},
    {"loongarch64", "LP64D", "s0-s8 (r23-r31), fp (r22)", "fs0-fs7 (f24-f31)", "none (fcsr0)",
     "sp (r3); return address in ra (r1)", 16},
};
enum { N_ABIS = sizeof abis / sizeof abis[0] };

static const char *detected_cpu(void)
{
#if defined(__x86_64__)
    return "x86_64";
#elif defined(__i386__)
    return "x86";
#elif defined(__aarch64__)
    return "aarch64";
#elif defined(__arm__)
    return "arm";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#elif defined(__mips__) && defined(_MIPS_SIM) && defined(_ABI64) && _MIPS_SIM == _ABI64
    return "mips64";
#elif defined(__mips__) && defined(_MIPS_SIM) && defined(_ABIO32) && _MIPS_SIM == _ABIO32
    return "mips";
#elif defined(__powerpc64__) && defined(_CALL_ELF) && _CALL_ELF == 2
    return "ppc64";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__loongarch64)
    return "loongarch64";
#else
    return NULL;
#endif
}

static void print_abi(const struct abi *a)
{
    printf("  %s (%s)\n", a->cpu, a->abi);
    printf("    integer callee-saved   : %s\n", a->integer);
    printf("    fp/vector callee-saved : %s\n", a->floating);
    printf("    control state preserved: %s\n", a->control);
    printf("    stack / return address : %s\n", a->sp_ra);
    printf("    stack alignment        : %d bytes at a call\n", a->stack_align);
}

static void print_registers(int all)
{
    const char *cpu = detected_cpu();
    int found = 0;
    printf("registers a context switch must save (the ABI's callee-saved set):\n");
    for (int i = 0; i < N_ABIS; i++) {
        if (all || (cpu != NULL && strcmp(cpu, abis[i].cpu) == 0)) {
            print_abi(&abis[i]);
            found = 1;
        }
    }
    if (!found) {
        printf("  this CPU/ABI is not in the table: read its psABI document and add it\n");
    }
}

/* ---- measured facts ----------------------------------------------------------------- */

__attribute__((noinline)) static int callee_is_lower(uintptr_t caller_local)
{
    volatile char local = 0;
    return (uintptr_t)&local < caller_local;
}

__attribute__((noinline)) static const char *stack_direction(void)
{
    volatile char local = 0;
    return callee_is_lower((uintptr_t)&local) ? "down (towards lower addresses)"
                                              : "up (towards higher addresses)";
}

static const char *byte_order(void)
{
    const uint32_t probe = 0x01020304U;
    unsigned char first = 0;
    memcpy(&first, &probe, 1);
    if (first == 0x04) {
        return "little-endian";
    }
    return first == 0x01 ? "big-endian" : "mixed";
}

static void print_facts(void)
{
    printf("types:\n");
    printf("  sizeof(void *)      = %zu\n", sizeof(void *));
    printf("  sizeof(long)        = %zu\n", sizeof(long));
    printf("  sizeof(int)         = %zu\n", sizeof(int));
    printf("  sizeof(long long)   = %zu\n", sizeof(long long));
    printf("  sizeof(size_t)      = %zu\n", sizeof(size_t));
    printf("  sizeof(double)      = %zu\n", sizeof(double));
    printf("  sizeof(long double) = %zu\n", sizeof(long double));
    printf("  sizeof(jmp_buf)     = %zu\n", sizeof(jmp_buf));
    printf("  sizeof(st_utime_t)  = %zu\n", sizeof(st_utime_t));
    printf("  alignof(max_align_t)= %zu\n", alignof(max_align_t));
    printf("  CHAR_BIT            = %d\n", CHAR_BIT);
    printf("machine:\n");
    printf("  byte order          = %s\n", byte_order());
    printf("  page size           = %ld\n", sysconf(_SC_PAGESIZE));
    printf("  stack grows         = %s\n", stack_direction());
    printf("  st version          = %s\n", ST_VERSION);
}

int main(int argc, char **argv)
{
    int all = argc > 1 && strcmp(argv[1], "--all") == 0;
    if (argc > 1 && !all) {
        fprintf(stderr, "usage: %s [--all]\n", argv[0]);
        return 2;
    }
    print_macros("operating system", os_macros, sizeof os_macros / sizeof os_macros[0]);
    print_macros("compiler", compiler_macros, sizeof compiler_macros / sizeof compiler_macros[0]);
#if defined(__VERSION__)
    printf("  %-26s = %s\n", "__VERSION__", __VERSION__);
#endif
    print_macros("cpu and abi", cpu_macros, sizeof cpu_macros / sizeof cpu_macros[0]);
    print_facts();
    printf("st arch/ directory for this CPU: %s\n",
           detected_cpu() != NULL ? detected_cpu() : "(unknown: a new port)");
    print_registers(all);
    return 0;
}
