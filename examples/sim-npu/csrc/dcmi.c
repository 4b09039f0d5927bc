/*
 * libdcmi.so stand-in: the device-memory figures of abi.md §5.
 *
 * Topology: SIM_NPU_DEVICE_COUNT cards (default 8), ids 0..N-1, each with
 * one device whose logic id equals the card id - the usual one-chip-per-card
 * layout of an 8-card server, and for N = 1 exactly the "card 0, device 0,
 * logic id 0" minimum of §7.
 *
 * Usage figures are read from the HAL stand-in (linked as DT_NEEDED), so
 * they move with every halMemAlloc/halMemFree: HBM used = live device bytes
 * of that device / 1 MiB (rounded down), and the process list holds one
 * entry, {getpid(), live bytes}. The total is 65536 MB, or the
 * SIM_NPU_HBM_LIMIT byte limit when that is smaller.
 */
#include <stdint.h>
#include <unistd.h>

#include "sim_npu.h"

#define DCMI_OK 0
#define DCMI_ERR_CODE_INVALID_PARAMETER (-8001)
#define SIM_HBM_TOTAL_MB 65536ULL

static int valid_card(int card_id)
{
    return card_id >= 0 && (uint32_t)card_id < sim_hal_device_count();
}

SIM_EXPORT int dcmi_init(void)
{
    return DCMI_OK;
}

SIM_EXPORT int dcmi_get_card_list(int *card_num, int *card_list, int list_len)
{
    if (!card_num || !card_list || list_len <= 0)
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    int n = (int)sim_hal_device_count();
    if (n > list_len)
        n = list_len;
    for (int i = 0; i < n; i++)
        card_list[i] = i;
    *card_num = n;
    return DCMI_OK;
}

SIM_EXPORT int dcmi_get_device_num_in_card(int card_id, int *device_num)
{
    if (!device_num || !valid_card(card_id))
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    *device_num = 1;
    return DCMI_OK;
}

SIM_EXPORT int dcmi_get_device_logic_id(int *device_logic_id, int card_id, int device_id)
{
    if (!device_logic_id || !valid_card(card_id) || device_id != 0)
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    *device_logic_id = card_id;
    return DCMI_OK;
}

SIM_EXPORT int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info *info)
{
    if (!info || !valid_card(card_id) || device_id != 0)
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    unsigned long long total_mb = SIM_HBM_TOTAL_MB;
    uint64_t limit = sim_hal_hbm_limit();
    if (limit / (1ULL << 20) < total_mb)
        total_mb = limit / (1ULL << 20);
    info->memory_size = total_mb;
    info->freq = 1600;
    info->memory_usage =
        (sim_hal_live_bytes((uint32_t)card_id) + sim_hal_other_bytes()) / (1ULL << 20);
    info->temp = 40;
    info->bandwith_util_rate = 0;
    return DCMI_OK;
}

/* `proc_info` is an array of 64 entries (the length msMemScope passes). */
SIM_EXPORT int dcmi_get_npu_proc_mem_info(int card_id, int device_id,
                                          struct dcmi_proc_mem_info *proc_info, int *proc_num)
{
    if (!proc_info || !proc_num || !valid_card(card_id) || device_id != 0)
        return DCMI_ERR_CODE_INVALID_PARAMETER;
    proc_info[0].proc_id = (int)getpid();
    proc_info[0].proc_mem_usage = (unsigned long)sim_hal_live_bytes((uint32_t)card_id);
    *proc_num = 1;
    return DCMI_OK;
}
