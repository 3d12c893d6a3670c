/* The request lifecycle (src/headd/req_life.c): every pair of phase and event from a running
 * client's state, then the paths a request takes end to end: a plain answer, a stop sequence,
 * the client leaving (while tokenizing, while running, after the end), a slow client cut, a
 * node lost mid-generation, a named session deleted under it, a generation followed again
 * after a head restart, n > 1 choices, a tokenize-only and a transcription request. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "headd/req_life.h"

enum { T = HL_TOKENIZING, X = HL_TRANSCRIBING, R = HL_RUNNING, E = HL_ENDED, W = HL_WAITING,
       D = HL_DONE };

/* The phase each event leads to from each phase (rows: phases 1..6; columns: events in
 * enum order: started, failed, output, output-complete, finished, cancel, stream-begun,
 * client-gone, cut, turn, choice-written, answered). */
static const uint8_t next_phase[HL_PHASES][HE_EVENTS] = {
	[T] = { R, E, T, T, T, T, T, T, T, T, T, D },
	[X] = { X, X, X, X, X, X, X, X, X, X, X, D },
	[R] = { R, E, R, R, E, R, R, R, R, R, R, R },
	[E] = { E, E, E, E, E, E, E, E, E, E, W, D },
	[W] = { W, W, W, W, W, W, W, W, W, W, W, D },
	[D] = { D, D, D, D, D, D, D, D, D, D, D, D },
};

/* The actions each event returns from the same states (only these are not 0). */
static unsigned actions_of(unsigned phase, unsigned ev)
{
	if (phase == R && ev == HE_CLIENT_GONE)
		return HA_GONE;
	if (phase == E && ev == HE_TURN)
		return HA_FINISH; /* and no deltas: nothing is dirty in the base state */
	return 0;
}

static struct headd_life base(unsigned phase)
{
	struct headd_life l;
	headd_life_init(&l, HL_TOKENIZING);
	l.phase = (uint8_t)phase;
	l.streaming = true;
	return l;
}

static void every_pair(void **state)
{
	(void)state;
	for (unsigned p = T; p <= D; p++) {
		for (unsigned ev = 0; ev < HE_EVENTS; ev++) {
			struct headd_life l = base(p);
			unsigned act = headd_life_on(&l, ev);
			if (l.phase != next_phase[p][ev] || act != actions_of(p, ev))
				fail_msg("%s + %s: phase %s actions %#x, expected %s %#x",
					 headd_life_phase_name(p), headd_life_event_name(ev),
					 headd_life_phase_name(l.phase), act,
					 headd_life_phase_name(next_phase[p][ev]), actions_of(p, ev));
			/* The flags each event may touch, and only those. */
			bool wants = (ev == HE_OUTPUT_COMPLETE || ev == HE_CANCEL || ev == HE_CLIENT_GONE ||
				      ev == HE_CUT) && (p == R || (p == T && ev == HE_CANCEL));
			assert_int_equal(l.cancel, wants ? HL_CANCEL_WANTED : HL_CANCEL_NONE);
			assert_int_equal(l.client, !(ev == HE_CLIENT_GONE || ev == HE_CUT));
			assert_int_equal(l.cut, ev == HE_CUT);
			assert_int_equal(l.failed, ev == HE_FAILED && (p == T || p == R));
			bool dirty = (p == R && (ev == HE_OUTPUT || ev == HE_FINISHED)) ||
				     (ev == HE_FAILED && (p == T || p == R));
			assert_int_equal(l.dirty, dirty);
		}
	}
}

/* A turn sends a wanted cancel once, writes deltas only for a client still reading the stream,
 * and says FINISH while the end is due. */
static void turns(void **state)
{
	(void)state;
	struct headd_life l = base(R);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0); /* nothing new */
	headd_life_on(&l, HE_CANCEL);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_CANCEL);
	assert_int_equal(l.cancel, HL_CANCEL_SENT);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0); /* sent once */
	headd_life_on(&l, HE_CANCEL);
	assert_int_equal(l.cancel, HL_CANCEL_SENT);
	/* Not streaming (a whole answer): output waits for the end. */
	l = base(R);
	l.streaming = false;
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
	headd_life_on(&l, HE_FINISHED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
	/* Ended with output still new: the last deltas, then the end, in one turn. */
	l = base(R);
	headd_life_on(&l, HE_OUTPUT);
	headd_life_on(&l, HE_FINISHED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS | HA_FINISH);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH); /* until the driver answers */
	headd_life_on(&l, HE_ANSWERED);
	assert_int_equal(l.phase, HL_DONE);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
}

/* Streamed completion: tokenized, started, the stream begins, tokens, finish, answer. */
static void plain_answer(void **state)
{
	(void)state;
	struct headd_life l;
	headd_life_init(&l, HL_TOKENIZING);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
	headd_life_on(&l, HE_STARTED);
	headd_life_on(&l, HE_STREAM_BEGUN);
	assert_true(l.streaming);
	assert_true(headd_life_generating(&l));
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS);
	headd_life_on(&l, HE_FINISHED);
	assert_true(headd_life_ended(&l));
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS | HA_FINISH);
	headd_life_on(&l, HE_ANSWERED);
	assert_int_equal(l.phase, HL_DONE);
	assert_false(l.failed);
	assert_int_equal(l.cancel, HL_CANCEL_NONE);
}

/* A stop sequence: the output is whole; the generation is cancelled at the next turn, and its
 * FINISH (cancelled) still ends it normally. */
static void stop_sequence(void **state)
{
	(void)state;
	struct headd_life l = base(R);
	headd_life_on(&l, HE_OUTPUT_COMPLETE);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_CANCEL | HA_DELTAS);
	headd_life_on(&l, HE_FINISHED); /* what the decoder held back goes out with the end */
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS | HA_FINISH);
	assert_false(l.failed);
}

/* The client leaves while its prompt is encoded: released at the next turn, never started. */
static void client_gone_tokenizing(void **state)
{
	(void)state;
	struct headd_life l;
	headd_life_init(&l, HL_TOKENIZING);
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), 0);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_RELEASE);
	assert_int_equal(l.phase, HL_DONE);
	headd_life_on(&l, HE_STARTED); /* an encoding that comes late starts nothing */
	assert_int_equal(l.phase, HL_DONE);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
}

/* The client leaves while it runs: counted once, cancelled at the next turn, no deltas; the
 * end is still due (the session is closed, a named one keeps its reply). */
static void client_gone_running(void **state)
{
	(void)state;
	struct headd_life l = base(R);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), HA_GONE);
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), 0);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_CANCEL);
	headd_life_on(&l, HE_FINISHED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
	/* After its end: nothing to cancel, nothing counted. */
	l = base(E);
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), 0);
	assert_int_equal(l.cancel, HL_CANCEL_NONE);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
}

/* A slow reader: its stream ends (cut), the generation is cancelled, no more deltas. */
static void slow_client_cut(void **state)
{
	(void)state;
	struct headd_life l = base(R);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS);
	headd_life_on(&l, HE_CUT);
	assert_true(l.cut);
	assert_false(l.client);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_CANCEL);
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), 0); /* already gone: not counted */
	headd_life_on(&l, HE_FINISHED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
}

/* The node is lost and the head machine gives up (ERROR): it fails, once; later events of the
 * generation change nothing. */
static void node_lost(void **state)
{
	(void)state;
	struct headd_life l = base(R);
	headd_life_on(&l, HE_FAILED);
	assert_true(l.failed);
	assert_int_equal(l.phase, HL_ENDED);
	headd_life_on(&l, HE_OUTPUT);
	headd_life_on(&l, HE_FINISHED);
	headd_life_on(&l, HE_STREAM_BEGUN);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS | HA_FINISH);
	/* Failed before its stream began: no stream; the answer is the error. */
	headd_life_init(&l, HL_TOKENIZING);
	headd_life_on(&l, HE_FAILED);
	headd_life_on(&l, HE_STREAM_BEGUN);
	assert_false(l.streaming);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
}

/* Its named session is deleted while it runs, or before it started: cancelled either way. */
static void session_deleted(void **state)
{
	(void)state;
	struct headd_life l;
	headd_life_init(&l, HL_TOKENIZING);
	headd_life_on(&l, HE_CANCEL);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0); /* nothing runs yet */
	headd_life_on(&l, HE_STARTED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_CANCEL);
}

/* After a head restart a client follows its generation again: it starts running, with what
 * the log held due at the first turn; an ended one is answered at once. */
static void head_restart_resume(void **state)
{
	(void)state;
	struct headd_life l;
	headd_life_init(&l, HL_RUNNING);
	headd_life_on(&l, HE_STREAM_BEGUN);
	headd_life_on(&l, HE_OUTPUT);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_DELTAS);
	headd_life_init(&l, HL_RUNNING);
	headd_life_on(&l, HE_OUTPUT);
	headd_life_on(&l, HE_FINISHED);
	assert_int_equal(headd_life_on(&l, HE_TURN), HA_FINISH);
}

/* n > 1: each choice writes its end and waits; the lead answers for all (ANSWERED each). */
static void choices(void **state)
{
	(void)state;
	struct headd_life c[3];
	for (int i = 0; i < 3; i++) {
		headd_life_init(&c[i], HL_RUNNING);
		headd_life_on(&c[i], HE_STREAM_BEGUN);
	}
	headd_life_on(&c[1], HE_FINISHED);
	assert_int_equal(headd_life_on(&c[1], HE_TURN), HA_DELTAS | HA_FINISH);
	headd_life_on(&c[1], HE_CHOICE_WRITTEN);
	assert_int_equal(c[1].phase, HL_WAITING);
	assert_int_equal(headd_life_on(&c[1], HE_TURN), 0);
	headd_life_on(&c[2], HE_FAILED); /* one choice cannot start */
	headd_life_on(&c[0], HE_FINISHED);
	for (int i = 0; i < 3; i += 2) {
		assert_true(headd_life_on(&c[i], HE_TURN) & HA_FINISH);
		headd_life_on(&c[i], HE_CHOICE_WRITTEN);
	}
	for (int i = 0; i < 3; i++) {
		assert_int_equal(c[i].phase, HL_WAITING);
		headd_life_on(&c[i], HE_ANSWERED);
		assert_int_equal(c[i].phase, HL_DONE);
	}
	/* A cut stream cuts every choice; a choice that ended is not cancelled. */
	headd_life_init(&c[0], HL_RUNNING);
	headd_life_init(&c[1], HL_RUNNING);
	headd_life_on(&c[1], HE_FINISHED);
	headd_life_on(&c[0], HE_CUT);
	headd_life_on(&c[1], HE_CUT);
	assert_int_equal(c[0].cancel, HL_CANCEL_WANTED);
	assert_int_equal(c[1].cancel, HL_CANCEL_NONE);
}

/* POST /v1/tokenize answers from TOKENIZING; a transcription from TRANSCRIBING; neither is a
 * generation, and neither is ever cancelled. */
static void tokenize_and_transcribe(void **state)
{
	(void)state;
	struct headd_life l;
	headd_life_init(&l, HL_TOKENIZING);
	headd_life_on(&l, HE_ANSWERED);
	assert_int_equal(l.phase, HL_DONE);
	headd_life_init(&l, HL_TRANSCRIBING);
	assert_false(headd_life_generating(&l));
	assert_int_equal(headd_life_on(&l, HE_CLIENT_GONE), 0);
	assert_int_equal(headd_life_on(&l, HE_TURN), 0);
	assert_int_equal(l.cancel, HL_CANCEL_NONE);
	headd_life_on(&l, HE_ANSWERED);
	assert_int_equal(l.phase, HL_DONE);
}

static void names(void **state)
{
	(void)state;
	for (unsigned p = T; p <= D; p++)
		assert_string_not_equal(headd_life_phase_name(p), "?");
	for (unsigned ev = 0; ev < HE_EVENTS; ev++)
		assert_string_not_equal(headd_life_event_name(ev), "?");
	assert_string_equal(headd_life_phase_name(0), "?");
	assert_string_equal(headd_life_event_name(HE_EVENTS), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_pair),
		cmocka_unit_test(turns),
		cmocka_unit_test(plain_answer),
		cmocka_unit_test(stop_sequence),
		cmocka_unit_test(client_gone_tokenizing),
		cmocka_unit_test(client_gone_running),
		cmocka_unit_test(slow_client_cut),
		cmocka_unit_test(node_lost),
		cmocka_unit_test(session_deleted),
		cmocka_unit_test(head_restart_resume),
		cmocka_unit_test(choices),
		cmocka_unit_test(tokenize_and_transcribe),
		cmocka_unit_test(names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
