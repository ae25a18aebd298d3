/*
 * A stand-in libnvidia-ml.so.1 for tests: answers NVML calls from a config file, so the
 * real pynvml code path runs without a GPU or driver.
 *
 * Build:  gcc -shared -fPIC -O2 -Wall -Wl,-soname,libnvidia-ml.so.1 \
 *             -o libnvidia-ml.so.1 nvml_standin.c
 * Config: the file named by $STAGECRAFT_NVML_CONFIG, else /etc/stagecraft/nvml-standin.conf,
 *         else built-in defaults (one NVIDIA A100-SXM4-80GB, cc 8.0, driver 550.54.15,
 *         CUDA 12.4). Read again at every nvmlInit*, so one process can change answers.
 *
 * Config lines (# comments, blank lines ignored):
 *   driver=550.54.15              nvmlSystemGetDriverVersion
 *   cuda=12040                    nvmlSystemGetCudaDriverVersion (1000*major + 10*minor)
 *   init_error=4                  nvmlInit* returns this nvmlReturn_t (4 = NO_PERMISSION)
 *   gpu=NAME|UUID|MAJOR|MINOR|MEMORY_BYTES|MIG    one GPU per line, in NVML (PCI) order;
 *                                 MIG: -1 not supported, 0 disabled, 1 enabled
 *   gpus=8|NAME|MAJOR|MINOR|MEMORY_BYTES          N identical GPUs, UUIDs generated
 *   mig=GPU_INDEX|MIG-UUID        a MIG device on that GPU
 *   error=FUNCTION|CODE[|GPU_INDEX]  that NVML function returns CODE (for one GPU or all)
 *   hang=FUNCTION|SECONDS         that function sleeps first (a hung driver)
 * Codes are NVML's nvmlReturn_t (nvml.h): 0 success, 3 not supported, 4 no permission,
 * 9 driver not loaded, 15 GPU is lost, 18 lib/RM version mismatch, 999 unknown.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_GPUS 64
#define MAX_MIG 8
#define MAX_RULES 32

typedef int nvmlReturn_t;

typedef struct {
    int is_mig;
    int index;      /* GPU index, or MIG slot */
    int parent;     /* for MIG handles */
    char name[96];
    char uuid[96];
    int major, minor;
    unsigned long long memory;
    int mig_mode;   /* -1 unsupported, 0, 1 */
    int nmig;
    char mig_uuids[MAX_MIG][96];
} device_t;

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

static device_t gpus[MAX_GPUS];
static device_t migs[MAX_GPUS][MAX_MIG];
static int ngpus;
static char driver[80];
static int cuda_version;
static int init_error;
static struct { char fn[64]; int code; int gpu; } errors[MAX_RULES];
static int nerrors;
static struct { char fn[64]; double seconds; } hangs[MAX_RULES];
static int nhangs;

static void set_defaults(void) {
    memset(gpus, 0, sizeof gpus);
    memset(migs, 0, sizeof migs);
    ngpus = 0; nerrors = 0; nhangs = 0; init_error = 0;
    strcpy(driver, "550.54.15");
    cuda_version = 12040;
}

static void add_gpu(const char *name, const char *uuid, int major, int minor,
                    unsigned long long mem, int mig) {
    if (ngpus >= MAX_GPUS) return;
    device_t *g = &gpus[ngpus];
    memset(g, 0, sizeof *g);
    g->index = ngpus;
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(g->uuid, sizeof g->uuid, "%s", uuid);
    g->major = major; g->minor = minor; g->memory = mem; g->mig_mode = mig;
    ngpus++;
}

static char *field(char **p) {          /* split on '|' */
    char *s = *p, *bar;
    if (!s) return "";
    bar = strchr(s, '|');
    if (bar) { *bar = 0; *p = bar + 1; } else { *p = NULL; }
    return s;
}

static void load_config(void) {
    const char *path = getenv("STAGECRAFT_NVML_CONFIG");
    FILE *f;
    char line[512];
    int have_gpu_line = 0;
    set_defaults();
    if (!path || !*path) path = "/etc/stagecraft/nvml-standin.conf";
    f = fopen(path, "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *eq, *key, *val, *p;
            line[strcspn(line, "\r\n")] = 0;
            if (line[0] == '#' || !line[0]) continue;
            eq = strchr(line, '=');
            if (!eq) continue;
            *eq = 0; key = line; val = eq + 1; p = val;
            if (!strcmp(key, "driver")) snprintf(driver, sizeof driver, "%s", val);
            else if (!strcmp(key, "cuda")) cuda_version = atoi(val);
            else if (!strcmp(key, "init_error")) init_error = atoi(val);
            else if (!strcmp(key, "gpu")) {
                char *name = field(&p), *uuid = field(&p), *ma = field(&p), *mi = field(&p);
                char *mem = field(&p), *mig = field(&p);
                add_gpu(name, uuid, atoi(ma), atoi(mi), strtoull(mem, NULL, 10), *mig ? atoi(mig) : -1);
                have_gpu_line = 1;
            } else if (!strcmp(key, "gpus")) {
                int n = atoi(field(&p)), i;
                char *name = field(&p), *ma = field(&p), *mi = field(&p), *mem = field(&p);
                for (i = 0; i < n; i++) {
                    char uuid[96];
                    snprintf(uuid, sizeof uuid, "GPU-5fa1c0de-0000-4000-8000-%012d", ngpus);
                    add_gpu(name, uuid, atoi(ma), atoi(mi), strtoull(mem, NULL, 10), -1);
                }
                have_gpu_line = 1;
            } else if (!strcmp(key, "mig")) {
                int gi = atoi(field(&p));
                char *uuid = field(&p);
                if (gi >= 0 && gi < ngpus && gpus[gi].nmig < MAX_MIG) {
                    device_t *m = &migs[gi][gpus[gi].nmig];
                    *m = gpus[gi];
                    m->is_mig = 1; m->parent = gi; m->index = gpus[gi].nmig; m->nmig = 0;
                    snprintf(m->uuid, sizeof m->uuid, "%s", uuid);
                    snprintf(gpus[gi].mig_uuids[gpus[gi].nmig], 96, "%s", uuid);
                    gpus[gi].nmig++;
                }
            } else if (!strcmp(key, "error") && nerrors < MAX_RULES) {
                char *fn = field(&p), *code = field(&p), *gpu = field(&p);
                snprintf(errors[nerrors].fn, 64, "%s", fn);
                errors[nerrors].code = atoi(code);
                errors[nerrors].gpu = *gpu ? atoi(gpu) : -1;
                nerrors++;
            } else if (!strcmp(key, "hang") && nhangs < MAX_RULES) {
                char *fn = field(&p), *secs = field(&p);
                snprintf(hangs[nhangs].fn, 64, "%s", fn);
                hangs[nhangs].seconds = atof(secs);
                nhangs++;
            }
        }
        fclose(f);
    }
    if (!have_gpu_line && !f)
        add_gpu("NVIDIA A100-SXM4-80GB", "GPU-5fa1c0de-0000-4000-8000-000000000000", 8, 0,
                85899345920ULL, 0);
}

/* Hang if asked, then return the configured error for (fn, gpu) or 0. */
static nvmlReturn_t hook(const char *fn, int gpu) {
    int i;
    for (i = 0; i < nhangs; i++)
        if (!strcmp(hangs[i].fn, fn)) usleep((useconds_t)(hangs[i].seconds * 1e6));
    for (i = 0; i < nerrors; i++)
        if (!strcmp(errors[i].fn, fn) && (errors[i].gpu < 0 || errors[i].gpu == gpu))
            return errors[i].code;
    return 0;
}

static int copy_str(char *dst, unsigned int len, const char *src) {
    if (strlen(src) + 1 > len) return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    strcpy(dst, src);
    return 0;
}

static device_t *dev(void *h) { return (device_t *)h; }
static int gidx(void *h) { return h ? (dev(h)->is_mig ? dev(h)->parent : dev(h)->index) : -1; }

static nvmlReturn_t do_init(const char *fn) {
    nvmlReturn_t r;
    load_config();
    r = hook(fn, -1);
    if (r) return r;
    return init_error;
}
nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init("nvmlInitWithFlags"); }
nvmlReturn_t nvmlShutdown(void) { return hook("nvmlShutdown", -1); }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    nvmlReturn_t r = hook("nvmlSystemGetDriverVersion", -1);
    return r ? r : copy_str(v, len, driver);
}
nvmlReturn_t nvmlSystemGetNVMLVersion(char *v, unsigned int len) {
    char buf[96];
    snprintf(buf, sizeof buf, "12.%s", driver);
    return copy_str(v, len, buf);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    nvmlReturn_t r = hook("nvmlSystemGetCudaDriverVersion", -1);
    if (r) return r;
    *v = cuda_version;
    return 0;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    nvmlReturn_t r = hook("nvmlDeviceGetCount_v2", -1);
    if (r) return r;
    *n = (unsigned int)ngpus;
    return 0;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { return nvmlDeviceGetCount_v2(n); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    nvmlReturn_t r = hook("nvmlDeviceGetHandleByIndex_v2", (int)i);
    if (r) return r;
    if (i >= (unsigned int)ngpus) return 2; /* INVALID_ARGUMENT */
    *h = &gpus[i];
    return 0;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, void **h) { return nvmlDeviceGetHandleByIndex_v2(i, h); }

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, void **h) {
    int i;
    nvmlReturn_t r = hook("nvmlDeviceGetHandleByUUID", -1);
    if (r) return r;
    for (i = 0; i < ngpus; i++)
        if (!strcmp(gpus[i].uuid, uuid)) { *h = &gpus[i]; return 0; }
    return 6; /* NOT_FOUND */
}

nvmlReturn_t nvmlDeviceGetName(void *h, char *name, unsigned int len) {
    nvmlReturn_t r = hook("nvmlDeviceGetName", gidx(h));
    return r ? r : copy_str(name, len, dev(h)->name);
}
nvmlReturn_t nvmlDeviceGetUUID(void *h, char *uuid, unsigned int len) {
    nvmlReturn_t r = hook("nvmlDeviceGetUUID", gidx(h));
    return r ? r : copy_str(uuid, len, dev(h)->uuid);
}
nvmlReturn_t nvmlDeviceGetMinorNumber(void *h, unsigned int *minor) {
    nvmlReturn_t r = hook("nvmlDeviceGetMinorNumber", gidx(h));
    if (r) return r;
    *minor = (unsigned int)gidx(h);
    return 0;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(void *h, int *major, int *minor) {
    nvmlReturn_t r = hook("nvmlDeviceGetCudaComputeCapability", gidx(h));
    if (r) return r;
    *major = dev(h)->major; *minor = dev(h)->minor;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(void *h, nvmlMemory_t *m) {
    nvmlReturn_t r = hook("nvmlDeviceGetMemoryInfo", gidx(h));
    if (r) return r;
    m->total = dev(h)->memory; m->used = 0; m->free = dev(h)->memory;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(void *h, nvmlMemory_v2_t *m) {
    nvmlReturn_t r = hook("nvmlDeviceGetMemoryInfo_v2", gidx(h));
    if (r) return r;
    m->total = dev(h)->memory; m->reserved = 0; m->used = 0; m->free = dev(h)->memory;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMigMode(void *h, unsigned int *current, unsigned int *pending) {
    nvmlReturn_t r = hook("nvmlDeviceGetMigMode", gidx(h));
    if (r) return r;
    if (dev(h)->mig_mode < 0) return 3; /* NOT_SUPPORTED */
    *current = *pending = (unsigned int)dev(h)->mig_mode;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(void *h, unsigned int *count) {
    nvmlReturn_t r = hook("nvmlDeviceGetMaxMigDeviceCount", gidx(h));
    if (r) return r;
    if (dev(h)->mig_mode < 0) return 3;
    *count = MAX_MIG;
    return 0;
}
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(void *h, unsigned int i, void **mig) {
    nvmlReturn_t r = hook("nvmlDeviceGetMigDeviceHandleByIndex", gidx(h));
    if (r) return r;
    if (i >= (unsigned int)dev(h)->nmig) return 6; /* NOT_FOUND */
    *mig = &migs[dev(h)->index][i];
    return 0;
}
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(void *h, unsigned int *is_mig) {
    *is_mig = (unsigned int)dev(h)->is_mig;
    return 0;
}
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void *h, void **parent) {
    if (!dev(h)->is_mig) return 2;
    *parent = &gpus[dev(h)->parent];
    return 0;
}
