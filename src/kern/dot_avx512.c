#include "kern/kern_internal.h"
const struct sf__kern_set sf__kern_avx512 = {.mm = {0}};
