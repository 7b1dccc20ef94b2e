/* probe — a verbs process for the preload unit tests: it calls
 * ibv_get_device_list once (there may be no device) and prints what
 * libswiftverbs.so decided: "state=S drivers=D resolver=R". */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <infiniband/verbs.h>

#include "swiftverbs.h"

int main(void)
{
	struct swiftverbs_stats *st = dlsym(RTLD_DEFAULT, "swiftverbs_stats");
	struct ibv_device **l = ibv_get_device_list(NULL);
	const char *d = getenv("RDMAV_DRIVERS");

	if (l)
		ibv_free_device_list(l);
	printf("state=%s drivers=%s resolver=%s\n", swv_state_name(st ? st->state : SWV_NONE), d ? d : "-",
	       swv_resolver_name(st ? st->resolver : SWV_BY_NONE));
	return 0;
}
