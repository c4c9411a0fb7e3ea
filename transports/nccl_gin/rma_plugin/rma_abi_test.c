/* CPU tier: the plugin exports ncclRmaPlugin_v14 with NCCL 2.30's layout
 * (offsets as NCCL's ncclNetProperties_v12_t and ncclRma_v14_t have them on
 * x86-64), one device with GIN-proxy properties, and the calls that need
 * no GPU: listen, closeListen, argument errors.
 * Usage: rma_abi_test path/to/libnccl-rma-engram.so */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "transports/nccl_gin/rma_plugin/rma_abi.h"

_Static_assert(offsetof(rma_net_props_t, ptr_support) == 24, "ptrSupport");
_Static_assert(offsetof(rma_net_props_t, max_recvs) == 52, "maxRecvs");
_Static_assert(offsetof(rma_net_props_t, net_device_type) == 56, "netDeviceType");
_Static_assert(offsetof(rma_net_props_t, vprops) == 64, "vProps");
_Static_assert(offsetof(rma_net_props_t, max_p2p_bytes) == 104, "maxP2pBytes");
_Static_assert(offsetof(rma_net_props_t, plane_id) == 126, "planeId");
_Static_assert(sizeof(rma_net_props_t) == 128, "ncclNetProperties_v12_t");
_Static_assert(offsetof(rma_plugin_v14_t, iput) == 13 * sizeof(void *), "iput");
_Static_assert(offsetof(rma_plugin_v14_t, test) == 17 * sizeof(void *), "test");
_Static_assert(sizeof(rma_plugin_v14_t) == 21 * sizeof(void *), "ncclRma_v14_t");
_Static_assert(sizeof(rma_config_t) == 12, "ncclRmaConfig_v14_t");

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        fprintf(stderr, "dlopen: %s\n", dlerror());
    CHECK(lib != NULL);
    const rma_plugin_v14_t *p = dlsym(lib, "ncclRmaPlugin_v14");
    CHECK(p != NULL && p->name != NULL && strcmp(p->name, "engram_cuda_ipc") == 0);
    CHECK(dlsym(lib, "rma_mesh_connect") == NULL); /* only the table is exported */
    void *const *fn = (void *const *)&p->init;
    for (int i = 0; i < 20; i++)
        CHECK(fn[i] != NULL);

    int n = 0;
    CHECK(p->devices(&n) == RMA_SUCCESS && n == 1);
    CHECK(p->devices(NULL) == RMA_ERR_ARGUMENT);
    rma_net_props_t props;
    memset(&props, 0xff, sizeof(props));
    CHECK(p->get_properties(0, &props) == RMA_SUCCESS);
    CHECK(props.net_device_type == RMA_NET_DEVICE_GIN_PROXY);
    CHECK(props.ptr_support == (RMA_PTR_HOST | RMA_PTR_CUDA | RMA_PTR_DMABUF));
    CHECK(props.pci_path == NULL && props.name != NULL && props.max_comms > 0 && props.max_recvs == 8);
    CHECK(props.vprops.ndevs == 1 && props.vprops.devs[0] == 0 && props.rail_id == -1 && props.plane_id == -1);
    CHECK(p->get_properties(1, &props) == RMA_ERR_ARGUMENT);

    char handle[RMA_HANDLE_BYTES];
    void *l1 = NULL, *l2 = NULL;
    CHECK(p->listen(NULL, 0, handle, &l1) == RMA_SUCCESS && l1 != NULL);
    CHECK(p->listen(NULL, 0, handle, &l2) == RMA_SUCCESS && l2 != NULL && l2 != l1);
    CHECK(p->listen(NULL, 1, handle, &l2) == RMA_ERR_ARGUMENT);
    CHECK(p->close_listen(l1) == RMA_SUCCESS);
    CHECK(p->close_listen(l2) == RMA_SUCCESS);
    int done = 0;
    CHECK(p->test(NULL, NULL, &done) == RMA_ERR_ARGUMENT);
    CHECK(p->progress(NULL) == RMA_ERR_ARGUMENT);
    CHECK(p->finalize(NULL) == RMA_SUCCESS);
    printf("rma_abi_test: passed\n");
    return 0;
}
