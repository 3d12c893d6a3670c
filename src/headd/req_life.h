/* A client request's lifecycle (chat, completion, tokenize, transcription), as a state
 * machine with no I/O: the API's code feeds it what happened (events) and does what it says
 * (actions). One transition function; every pair of state and event is unit-tested
 * (tests/unit/test_req_life.c).
 *
 *   TOKENIZING --STARTED--> RUNNING --FINISHED/FAILED--> ENDED --TURN: FINISH--> (answer)
 *       |                      |                                   |
 *       | client gone: TURN    | client gone, cut, output         CHOICE_WRITTEN: WAITING
 *       v   says RELEASE       |   complete, CANCEL: a cancel      (n > 1: the lead answers
 *     DONE <----ANSWERED-------+   is sent at the next TURN         for every choice)
 *
 * TRANSCRIBING (POST /v1/audio/transcriptions runs as a state operation, not a generation)
 * goes to DONE with ANSWERED. Beside the phase: whether the client is still there, whether
 * its stream began or was cut, whether the request failed, whether a cancel is wanted or was
 * sent, and whether output is waiting for the next turn. */
#ifndef HEADD_REQ_LIFE_H
#define HEADD_REQ_LIFE_H

#include <stdbool.h>
#include <stdint.h>

enum headd_life_phase {
	HL_TOKENIZING = 1, /* waiting for a node to encode the prompt */
	HL_TRANSCRIBING,   /* a transcription running on a node */
	HL_RUNNING,        /* its generation runs on the fleet */
	HL_ENDED,          /* the generation ended (or the request failed): its end is due */
	HL_WAITING,        /* a choice of n > 1 whose end was written: the lead answers once all
			    * have ended */
	HL_DONE,           /* answered (or abandoned): freed by the sweep */
	HL_PHASES
};

enum headd_life_cancel {
	HL_CANCEL_NONE = 0,
	HL_CANCEL_WANTED, /* sent at the next turn while it runs */
	HL_CANCEL_SENT,
};

struct headd_life {
	uint8_t phase;     /* enum headd_life_phase */
	uint8_t cancel;    /* enum headd_life_cancel */
	bool client;       /* its client is still there */
	bool streaming;    /* the event stream's headers went out */
	bool cut;          /* the client read too slowly: its stream was ended */
	bool failed;       /* it ends in an error (the error object is the caller's) */
	bool dirty;        /* output came since the last turn */
};

enum headd_life_event {
	HE_STARTED = 0,     /* its generation started on the fleet */
	HE_FAILED,          /* it ends in an error */
	HE_OUTPUT,          /* tokens or logprobs came */
	HE_OUTPUT_COMPLETE, /* the output is whole (a stop sequence): the rest is not wanted */
	HE_FINISHED,        /* the generation ended on the fleet */
	HE_CANCEL,          /* its named session was deleted: stop the generation */
	HE_STREAM_BEGUN,    /* the stream's headers went out */
	HE_CLIENT_GONE,     /* the connection closed */
	HE_CUT,             /* the client left more unread than --stream-buffer: stream ended */
	HE_TURN,            /* once per loop turn: what is due now */
	HE_CHOICE_WRITTEN,  /* a choice's end was written; it waits for the others */
	HE_ANSWERED,        /* its answer went out (or there is no one to answer): over */
	HE_EVENTS
};

enum headd_life_action {
	HA_CANCEL = 1u << 0,  /* cancel the generation on the fleet */
	HA_DELTAS = 1u << 1,  /* write the new output to the client's stream */
	HA_FINISH = 1u << 2,  /* write the end (the answer, the stream's last events) */
	HA_RELEASE = 1u << 3, /* it ended before it ran: let go of its named session */
	HA_GONE = 1u << 4,    /* a running generation lost its client (counted, logged) */
};

/* A request starting in phase (TOKENIZING, TRANSCRIBING, or RUNNING for a choice or a
 * generation followed again), its client there. */
void headd_life_init(struct headd_life *l, enum headd_life_phase phase);

/* Applies ev; returns the actions (enum headd_life_action bits) the caller must take now. An
 * event that does not apply in the current state changes nothing and returns 0. */
unsigned headd_life_on(struct headd_life *l, enum headd_life_event ev);

/* Whether the generation is over for the fleet (ENDED, WAITING, DONE). */
static inline bool headd_life_ended(const struct headd_life *l)
{
	return l->phase >= HL_ENDED;
}

/* Whether a generation was started and the request is not over (RUNNING, ENDED, WAITING). */
static inline bool headd_life_generating(const struct headd_life *l)
{
	return l->phase >= HL_RUNNING && l->phase < HL_DONE;
}

const char *headd_life_phase_name(enum headd_life_phase p);
const char *headd_life_event_name(enum headd_life_event ev);

#endif
