# Writes OUT: WEX_SOURCE_ID, a SHA-256 over the host library's sources
# and the SDK headers under ROOT. Plan shares carry it in their key, so a
# share made by another build of the planner is never used.
file(GLOB_RECURSE files RELATIVE ${ROOT}
  ${ROOT}/host/lib/*.c ${ROOT}/host/lib/*.h ${ROOT}/sdk/include/wex/*.h)
list(SORT files)
set(all "")
foreach(f ${files})
  file(SHA256 ${ROOT}/${f} h)
  string(APPEND all "${f} ${h}\n")
endforeach()
string(SHA256 id "${all}")
set(text "#define WEX_SOURCE_ID \"${id}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
