# ctest's fuzz.replay.<harness>: make the harness's corpus, then replay it and the
# checked-in regressions. Variables: MAKE_CORPUS REPLAY HARNESS CORPUS REGRESSIONS.
execute_process(COMMAND ${MAKE_CORPUS} ${CORPUS} ${HARNESS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "make_corpus ${CORPUS} ${HARNESS} failed: ${rc}")
endif()
execute_process(COMMAND ${REPLAY} ${CORPUS}/${HARNESS} ${REGRESSIONS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${REPLAY} failed: ${rc}")
endif()
