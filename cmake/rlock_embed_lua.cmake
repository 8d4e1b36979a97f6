# rlock_embed_lua.cmake - embed every lua/*.lua byte for byte into C.
#
# Run in script mode:
#   cmake -DLUA_DIR=<dir with *.lua> -DOUT_DIR=<output dir> -P rlock_embed_lua.cmake
#
# Writes <OUT_DIR>/rlock_scripts_gen.h, <OUT_DIR>/rlock_scripts_gen.c and the
# expanded scripts <OUT_DIR>/lua/*.lua. Redis scripts cannot call each other,
# so Lua shared by several scripts lives in a snippet (lua/inc/*.lua) that a
# script names on a line of its own, "--@include inc/<file>.lua"; that whole
# line is replaced by the snippet's bytes (which end with a newline). Snippets
# include nothing themselves. Each expanded script becomes an unsigned char
# array holding its exact bytes (never trimmed, never re-encoded) plus a
# trailing NUL that is not counted in len, and the SHA1 of those exact bytes
# as computed by file(SHA1), which is what Redis' SCRIPT LOAD returns for the
# same bytes. The expanded files are what lua_syntax parses and what
# core_scripts compares with the table. No Python and no external tool is
# needed.
#
# Each script also gets its sharded pub/sub variant (a Redis Cluster client in sharded mode,
# rlock_options.cluster_pubsub): the same bytes with every "redis.pcall('publish', " and
# "redis.call('publish', " made 'spublish', and "'pubsub', 'numsub'" made
# "'pubsub', 'shardnumsub'", written to <OUT_DIR>/lua_sharded/*.lua (lua_syntax parses those too)
# and embedded with its own SHA1 in rlk_script_table_sharded; a script that publishes nothing has
# the same entry in both tables. The lua/ sources stay as they are.

cmake_minimum_required(VERSION 3.16)

if(NOT LUA_DIR OR NOT OUT_DIR)
  message(FATAL_ERROR "rlock_embed_lua.cmake: LUA_DIR and OUT_DIR must be set")
endif()

file(GLOB _lua_files LIST_DIRECTORIES false "${LUA_DIR}/*.lua")
list(SORT _lua_files)

set(_enum "")
set(_arrays "")
set(_table "")
set(_table_sharded "")
set(_count 0)
set(_seen_ids "")

# Sets out_var to the text of script file with every "--@include <path>" line
# replaced by the bytes of LUA_DIR/<path>.
function(rlk_expand_includes file out_var)
  file(READ "${file}" _text)
  # The line's own newline stays out of the match, so that two include lines in a row both match.
  string(REGEX MATCHALL "\n--@include [^\n]*" _lines "${_text}")
  foreach(_line IN LISTS _lines)
    string(REGEX REPLACE "^\n--@include ([^\n]*)$" "\\1" _inc "${_line}")
    if(NOT _inc MATCHES "^inc/[A-Za-z0-9_]+\\.lua$" OR NOT EXISTS "${LUA_DIR}/${_inc}")
      message(FATAL_ERROR "rlock_embed_lua: ${file}: no snippet lua/${_inc}")
    endif()
    file(READ "${LUA_DIR}/${_inc}" _snippet)
    if(NOT _snippet MATCHES "\n$" OR _snippet MATCHES "(^|\n)--@include")
      message(FATAL_ERROR
        "rlock_embed_lua: lua/${_inc}: a snippet ends with a newline and includes nothing")
    endif()
    string(REGEX REPLACE "\n$" "" _snippet "${_snippet}")
    string(REPLACE "${_line}" "\n${_snippet}" _text "${_text}")
  endforeach()
  set(${out_var} "${_text}" PARENT_SCOPE)
endfunction()

# Sets out_var to text with its publishing calls made sharded (see the top of this file).
function(rlk_sharded_text text out_var)
  string(REPLACE "redis.pcall('publish', " "redis.pcall('spublish', " _t "${text}")
  string(REPLACE "redis.call('publish', " "redis.call('spublish', " _t "${_t}")
  string(REPLACE "'pubsub', 'numsub'" "'pubsub', 'shardnumsub'" _t "${_t}")
  set(${out_var} "${_t}" PARENT_SCOPE)
endfunction()

# Appends to the variable named by arrays_var the C array of file's bytes called array_name, and
# sets sha_var and len_var to the file's SHA1 and length.
function(rlk_embed_file file array_name label arrays_var sha_var len_var)
  file(READ "${file}" _hex HEX)
  file(SHA1 "${file}" _sha1)
  string(TOLOWER "${_sha1}" _sha1)
  string(LENGTH "${_hex}" _hexlen)
  math(EXPR _len "${_hexlen} / 2")
  # "41424344" -> "0x41,0x42,0x43,0x44," then wrap every 12 bytes.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
  # (CMake regexes have no {n} quantifier: spell the 12 bytes out.)
  string(REPEAT "0x[0-9a-f][0-9a-f]," 12 _row)
  string(REGEX REPLACE "(${_row})" "\\1\n    " _bytes "${_bytes}")
  set(_arrays "${${arrays_var}}")
  string(APPEND _arrays
    "/* ${label}: ${_len} bytes, sha1 ${_sha1} */\n"
    "static const unsigned char ${array_name}[${_len} + 1] = {\n"
    "    ${_bytes}0x00 /* NUL, not part of the script */\n"
    "};\n\n")
  set(${arrays_var} "${_arrays}" PARENT_SCOPE)
  set(${sha_var} "${_sha1}" PARENT_SCOPE)
  set(${len_var} "${_len}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY "${OUT_DIR}/lua")
file(MAKE_DIRECTORY "${OUT_DIR}/lua_sharded")
foreach(_src IN LISTS _lua_files)
  get_filename_component(_name "${_src}" NAME)
  rlk_expand_includes("${_src}" _expanded)
  set(_file "${OUT_DIR}/lua/${_name}")
  file(WRITE "${_file}" "${_expanded}")
  # Stem = file name without the final ".lua" (NAME_WE would cut at the first dot).
  string(REGEX REPLACE "\\.lua$" "" _stem "${_name}")
  if(NOT _stem MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR
      "rlock_embed_lua: '${_name}': the file stem must be a C identifier "
      "([A-Za-z_][A-Za-z0-9_]*)")
  endif()
  string(TOUPPER "${_stem}" _upper)
  if("${_upper}" IN_LIST _seen_ids)
    message(FATAL_ERROR "rlock_embed_lua: two scripts map to RLK_SCRIPT_${_upper}")
  endif()
  list(APPEND _seen_ids "${_upper}")

  rlk_embed_file("${_file}" "rlk_lua_${_stem}" "lua/${_name}" _arrays _sha1 _len)
  string(APPEND _enum "    RLK_SCRIPT_${_upper}, /* lua/${_name} */\n")
  string(APPEND _table
    "    [RLK_SCRIPT_${_upper}] = {\"${_stem}\", rlk_lua_${_stem}, ${_len}, \"${_sha1}\"},\n")
  rlk_sharded_text("${_expanded}" _sharded)
  file(WRITE "${OUT_DIR}/lua_sharded/${_name}" "${_sharded}")
  if(_sharded STREQUAL _expanded)
    string(APPEND _table_sharded
      "    [RLK_SCRIPT_${_upper}] = {\"${_stem}\", rlk_lua_${_stem}, ${_len}, \"${_sha1}\"},\n")
  else()
    rlk_embed_file("${OUT_DIR}/lua_sharded/${_name}" "rlk_lua_${_stem}_sharded"
                   "lua/${_name}, sharded" _arrays _sha1 _len)
    string(APPEND _table_sharded
      "    [RLK_SCRIPT_${_upper}] = {\"${_stem}\", rlk_lua_${_stem}_sharded, ${_len}, "
      "\"${_sha1}\"},\n")
  endif()
  math(EXPR _count "${_count} + 1")
endforeach()

if(_count EQUAL 0)
  set(_table_decl "rlk_script_table[RLK_SCRIPT__COUNT + 1]")
  set(_table "    {NULL, NULL, 0, NULL} /* sentinel: C forbids zero-length arrays */\n")
  set(_table_sharded "${_table}")
  set(_empty_note
" *\n * NOTE: lua/ holds no script, so RLK_SCRIPT__COUNT is 0 and the table is\n * declared with one sentinel entry (all NULL/0) because C forbids\n * zero-length arrays. Loops bounded by RLK_SCRIPT__COUNT never see it.\n")
else()
  set(_table_decl "rlk_script_table[RLK_SCRIPT__COUNT]")
  set(_empty_note "")
endif()

string(REPLACE "rlk_script_table[" "rlk_script_table_sharded[" _table_decl_sharded "${_table_decl}")

set(_header
"/* rlock_scripts_gen.h - GENERATED by cmake/rlock_embed_lua.cmake; do not edit.
 *
 * One entry per .lua file in lua/, sorted by file name. name is the file stem, body
 * holds the exact bytes of the file (followed by a NUL that len does not
 * count), sha1 is the 40 lowercase hex digit SHA1 of those bytes, i.e. the
 * value SCRIPT LOAD returns and EVALSHA expects.
${_empty_note} */
#ifndef RLOCK_SCRIPTS_GEN_H
#define RLOCK_SCRIPTS_GEN_H

#include <stddef.h>

enum rlk_script_id {
${_enum}    RLK_SCRIPT__COUNT
};

typedef struct rlk_script_src {
    const char *name;          /* file stem, e.g. \"lock_acquire\" */
    const unsigned char *body; /* exact file bytes, NUL-terminated for convenience */
    size_t len;                /* number of bytes in body, without the NUL */
    const char *sha1;          /* 40 lowercase hex chars of the exact bytes */
} rlk_script_src;

extern const rlk_script_src ${_table_decl};
/* The same scripts for sharded pub/sub (SPUBLISH, PUBSUB SHARDNUMSUB), by the same ids. */
extern const rlk_script_src ${_table_decl_sharded};

#endif /* RLOCK_SCRIPTS_GEN_H */
")

set(_source
"/* rlock_scripts_gen.c - GENERATED by cmake/rlock_embed_lua.cmake; do not edit. */
#include \"rlock_scripts_gen.h\"

${_arrays}const rlk_script_src ${_table_decl} = {
${_table}};

const rlk_script_src ${_table_decl_sharded} = {
${_table_sharded}};
")

file(MAKE_DIRECTORY "${OUT_DIR}")
file(WRITE "${OUT_DIR}/rlock_scripts_gen.h" "${_header}")
file(WRITE "${OUT_DIR}/rlock_scripts_gen.c" "${_source}")
