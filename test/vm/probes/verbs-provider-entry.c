/* The probe library of verbs-provider-entry.sh: listed in libibverbs.d as
 * a provider, it registers nothing; its constructor records that it ran,
 * in which process, and whether libibverbs was loaded by then. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void probe_init(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/run/probe-provider/loaded.%d", (int)getpid());
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "libibverbs_loaded=%d ibv_open_device=%s\n", h != NULL,
			h && dlsym(h, "ibv_open_device") ? "found" : "missing");
		fclose(f);
	}
}
