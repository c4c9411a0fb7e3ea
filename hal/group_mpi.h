/* MPI provider (//hal:group_mpi, built where MPI is found). Not part of
 * libengram.so.0 or the installed headers: libengram depends on no MPI, so
 * a program that wants it builds hal/group_mpi.c into itself with its MPI.
 * Wraps a duplicate of MPI_COMM_WORLD; MPI must already be initialised,
 * and the group destroyed before MPI_Finalize. local_size = 0 takes it from
 * MPI_COMM_TYPE_SHARED. */
#ifndef ENGRAM_HAL_GROUP_MPI_H
#define ENGRAM_HAL_GROUP_MPI_H

#include "engram/group.h"

#ifdef __cplusplus
extern "C" {
#endif

engram_status_t engram_group_mpi_create(int local_size, engram_group_t **out);

#ifdef __cplusplus
}
#endif
#endif
