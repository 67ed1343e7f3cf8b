# The Redis scripts' one splice step: lua/<script>.lua with each line
#
#   -- @include NAME
#
# (indented or not) replaced by the text of lua/lib/NAME (the pieces the
# decision scripts share: the call's layout, the request-id records, ...).
# Redis runs one chunk per EVALSHA and has no `require`, so the shared text
# is put in place before the script reaches Redis: the binary embeds the
# spliced text and its SHA-1 (cmake/embed.cmake includes this file), and
# every test or bench that loads a script from disk runs this same file:
#
#   cmake -DSCRIPT=lua/sliding_log.lua -DOUT=/tmp/sliding_log.lua -P cmake/lua_splice.cmake
#
# (tests/integration/harness: lua_script(); tests/bench/redis-cost.sh and
# run.sh).
# A script without a directive comes out byte for byte as it is (copied,
# not read and written: cmake's file(READ) drops carriage returns). The
# directive is a whole line, so a line that only mentions it (a comment)
# is left alone; an included file may not include another (one level: a
# reader finds every shared piece named in the script itself).

# lua_splice_read(<var> <file>): its text; stops when cmake would not keep every byte
# (a carriage return or a NUL byte: file(READ) drops them).
function(lua_splice_read var path)
  file(READ "${path}" text)
  file(SIZE "${path}" size)
  string(LENGTH "${text}" len)
  if(NOT len EQUAL size)
    message(FATAL_ERROR "lua_splice: ${path} holds carriage returns or NUL bytes, which "
            "cmake cannot splice: save it with \\n line ends")
  endif()
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# lua_splice_find(<var> <text>): where in text the newline before the first directive
# line is, or -1.
function(lua_splice_find var text)
  string(REGEX MATCH "\n[ ]*-- @include " hit "${text}")
  if(hit STREQUAL "")
    set(${var} -1 PARENT_SCOPE)
  else()
    string(FIND "${text}" "${hit}" at)
    set(${var} ${at} PARENT_SCOPE)
  endif()
endfunction()

# lua_splice(<out var> <script>): the script's text, spliced, and
# <out var>_SPLICED true; false (and the text unset) when it has no
# directive: use the file itself. A directive naming a file that lua/lib/
# does not hold, or a nested one, stops with an error naming the script,
# the line and the file.
function(lua_splice out script)
  get_filename_component(script "${script}" ABSOLUTE)
  get_filename_component(dir "${script}" DIRECTORY)
  get_filename_component(name "${script}" NAME)
  file(READ "${script}" text)
  lua_splice_find(first "\n${text}")
  if(first EQUAL -1)
    set(${out}_SPLICED FALSE PARENT_SCOPE)
    return()
  endif()
  lua_splice_read(text "${script}")
  # `rest` is what is not yet searched, from a newline on (one put in front
  # so a directive on the first line is found as any other); `result` what
  # is done. A piece goes into `result`, so its text is never searched.
  set(rest "\n${text}")
  set(result "")
  set(line 0)
  lua_splice_find(at "${rest}")
  while(NOT at EQUAL -1)
    math(EXPR keep "${at} + 1")
    string(SUBSTRING "${rest}" 0 ${keep} head)
    string(APPEND result "${head}")
    string(REGEX MATCHALL "\n" nl "${head}")
    list(LENGTH nl lines)
    math(EXPR line "${line} + ${lines}")
    string(SUBSTRING "${rest}" ${keep} -1 rest)
    string(FIND "${rest}" "\n" eol)
    if(eol EQUAL -1)
      set(directive "${rest}")
      set(rest "")
    else()
      string(SUBSTRING "${rest}" 0 ${eol} directive)
      string(SUBSTRING "${rest}" ${eol} -1 rest)   # from the directive's newline on
    endif()
    if(NOT directive MATCHES "^[ ]*-- @include ([A-Za-z0-9_]+[.]lua)$")
      message(FATAL_ERROR "lua_splice: ${name} line ${line}: \"${directive}\" is no "
              "directive (-- @include NAME.lua, NAME of letters, digits and _)")
    endif()
    set(lib "${dir}/lib/${CMAKE_MATCH_1}")
    if(NOT EXISTS "${lib}")
      message(FATAL_ERROR "lua_splice: ${name} line ${line}: includes ${CMAKE_MATCH_1}, "
              "but there is no ${lib}")
    endif()
    lua_splice_read(piece "${lib}")
    lua_splice_find(nested "\n${piece}")
    if(NOT nested EQUAL -1)
      message(FATAL_ERROR "lua_splice: ${lib} (included by ${name} line ${line}) includes "
              "another file: one level only")
    endif()
    # the piece's last newline is the directive's own, which `rest` keeps
    if(piece MATCHES "\n$" AND NOT rest STREQUAL "")
      string(LENGTH "${piece}" len)
      math(EXPR len "${len} - 1")
      string(SUBSTRING "${piece}" 0 ${len} piece)
    endif()
    string(APPEND result "${piece}")
    lua_splice_find(at "${rest}")
  endwhile()
  string(APPEND result "${rest}")
  string(SUBSTRING "${result}" 1 -1 result)   # the newline put in front
  set(${out} "${result}" PARENT_SCOPE)
  set(${out}_SPLICED TRUE PARENT_SCOPE)
endfunction()

# Run as a script (-P): SCRIPT in, OUT the spliced text.
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  if(NOT DEFINED SCRIPT OR NOT DEFINED OUT)
    message(FATAL_ERROR "usage: cmake -DSCRIPT=lua/NAME.lua -DOUT=FILE -P cmake/lua_splice.cmake")
  endif()
  if(NOT EXISTS "${SCRIPT}")
    message(FATAL_ERROR "lua_splice: no script ${SCRIPT}")
  endif()
  lua_splice(spliced "${SCRIPT}")
  if(spliced_SPLICED)
    file(WRITE "${OUT}" "${spliced}")
  else()
    file(COPY_FILE "${SCRIPT}" "${OUT}")
  endif()
endif()
