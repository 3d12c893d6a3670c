/* The engine --engine names, made from the options. */
#ifndef NODED_ENGINE_SETUP_H
#define NODED_ENGINE_SETUP_H

#include <superfluid/engine.h>

#include "noded_opts.h"

/* Returns 0, or a negative sf_code with err set (SF_E_RANGE: the options ask for a shape the
 * engine cannot take). */
int noded_engine_new(const struct noded_opts *o, struct sf_engine **out, struct sf_err *err);

#endif
