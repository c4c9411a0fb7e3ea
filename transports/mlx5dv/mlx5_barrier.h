/* The CPU barriers the mlx5 data path needs between its stores to host
 * memory the NIC reads by DMA (WQEs, doorbell records), its stores to the
 * NIC's BlueFlame register (write-combining MMIO) and its reads of memory
 * the NIC writes by DMA (CQEs). C11 fences are not enough: they order
 * memory between CPUs (on aarch64 `dmb ish`, the inner-shareable domain),
 * and the NIC sits outside that domain, so WQEs could reach it after the
 * doorbell that tells it to read them.
 *
 * The semantics are rdma-core's for the same job (util/udma_barrier.h:
 * udma_to_device_barrier, udma_from_device_barrier, mmio_wc_start,
 * mmio_flush_writes), with the instructions it picks for each CPU. */
#ifndef ENGRAM_TRANSPORTS_MLX5DV_BARRIER_H
#define ENGRAM_TRANSPORTS_MLX5DV_BARRIER_H

#if defined(__x86_64__)
/* x86 keeps ordinary stores in order and visible to DMA in that order:
 * only the compiler must not move them. */
#define ENGRAM_MLX5_TO_DEVICE_ASM ""
/* Later loads do not pass the load that saw the owner bit. */
#define ENGRAM_MLX5_FROM_DEVICE_ASM "lfence"
/* Drains the write-combining buffer; orders WC stores against all others. */
#define ENGRAM_MLX5_MMIO_FLUSH_ASM "sfence"
#elif defined(__aarch64__)
/* Stores before, stores after, outer-shareable domain (the NIC's). */
#define ENGRAM_MLX5_TO_DEVICE_ASM "dmb oshst"
/* Loads before, loads and stores after, outer-shareable domain. */
#define ENGRAM_MLX5_FROM_DEVICE_ASM "dmb oshld"
/* Waits until earlier stores, device memory included, have completed:
 * the only ordering that holds between normal and device-nGnRE/WC stores. */
#define ENGRAM_MLX5_MMIO_FLUSH_ASM "dsb st"
#else
#error "mlx5_barrier.h: no DMA barriers for this CPU (x86_64 and aarch64 are known)"
#endif

/* WQE (or other DMA-read) stores before -> doorbell-record store after: the
 * NIC that sees the new producer index also sees the WQEs. */
static inline void engram_mlx5_to_device_barrier(void)
{
    __asm__ volatile(ENGRAM_MLX5_TO_DEVICE_ASM ::: "memory");
}

/* The read of a CQE's owner bit before -> the reads of its other fields
 * (and any store, such as the consumer index) after: they see what the NIC
 * wrote before it flipped the owner bit. */
static inline void engram_mlx5_from_device_barrier(void)
{
    __asm__ volatile(ENGRAM_MLX5_FROM_DEVICE_ASM ::: "memory");
}

/* Doorbell-record store before -> BlueFlame (MMIO) store after: the NIC
 * the register wakes reads the new record. rdma-core's mmio_wc_start. */
static inline void engram_mlx5_mmio_wc_start(void)
{
    __asm__ volatile(ENGRAM_MLX5_MMIO_FLUSH_ASM ::: "memory");
}

/* BlueFlame store before -> leaves the CPU now, and is not merged with the
 * next doorbell's store to the other half. rdma-core's mmio_flush_writes. */
static inline void engram_mlx5_mmio_flush_writes(void)
{
    __asm__ volatile(ENGRAM_MLX5_MMIO_FLUSH_ASM ::: "memory");
}

#endif
