/*
 * The script registry: every lua/NAME.lua file compiled in byte for byte with its SHA1 (generated
 * by cmake/embed_lua.cmake into rlock_scripts_gen.h). Script ids are RLK_SCRIPT_<FILE_STEM>.
 */
#ifndef RLK_SCRIPTS_H
#define RLK_SCRIPTS_H

#include "rlock_scripts_gen.h"

const rlk_script_src *rlk_script_get(int id);

#endif
