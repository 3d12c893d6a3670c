/* The request lifecycle's transition function (req_life.h). */
#include "req_life.h"

#include <string.h>

void headd_life_init(struct headd_life *l, enum headd_life_phase phase)
{
	memset(l, 0, sizeof(*l));
	l->phase = (uint8_t)phase;
	l->client = true;
}

/* A cancel is wanted unless one is already wanted or sent. */
static void want_cancel(struct headd_life *l)
{
	if (l->cancel == HL_CANCEL_NONE)
		l->cancel = HL_CANCEL_WANTED;
}

static unsigned on_turn(struct headd_life *l)
{
	unsigned act = 0;
	switch (l->phase) {
	case HL_TOKENIZING:
		if (!l->client) { /* the client left before its prompt was encoded */
			l->phase = HL_DONE;
			return HA_RELEASE;
		}
		return 0;
	case HL_RUNNING:
		if (l->cancel == HL_CANCEL_WANTED) {
			l->cancel = HL_CANCEL_SENT;
			act |= HA_CANCEL;
		}
		break;
	case HL_ENDED:
		break;
	default: /* TRANSCRIBING, WAITING, DONE: nothing is due on a turn */
		return 0;
	}
	if (l->dirty) {
		l->dirty = false;
		if (l->client && l->streaming && !l->cut)
			act |= HA_DELTAS;
	}
	if (l->phase == HL_ENDED)
		act |= HA_FINISH;
	return act;
}

unsigned headd_life_on(struct headd_life *l, enum headd_life_event ev)
{
	const uint8_t p = l->phase;
	switch (ev) {
	case HE_STARTED:
		if (p == HL_TOKENIZING)
			l->phase = HL_RUNNING;
		return 0;
	case HE_FAILED:
		if (p == HL_TOKENIZING || p == HL_RUNNING) {
			l->phase = HL_ENDED;
			l->failed = true;
			l->dirty = true;
		}
		return 0;
	case HE_OUTPUT:
		if (p == HL_RUNNING)
			l->dirty = true;
		return 0;
	case HE_OUTPUT_COMPLETE:
		if (p == HL_RUNNING)
			want_cancel(l);
		return 0;
	case HE_FINISHED:
		if (p == HL_RUNNING) {
			l->phase = HL_ENDED;
			l->dirty = true;
		}
		return 0;
	case HE_CANCEL:
		if (p == HL_TOKENIZING || p == HL_RUNNING)
			want_cancel(l);
		return 0;
	case HE_STREAM_BEGUN:
		if (l->client && !l->failed && p < HL_DONE)
			l->streaming = true;
		return 0;
	case HE_CLIENT_GONE:
		if (!l->client)
			return 0;
		l->client = false;
		if (p != HL_RUNNING)
			return 0;
		want_cancel(l);
		return HA_GONE;
	case HE_CUT:
		if (l->cut)
			return 0;
		l->client = false;
		l->cut = true;
		if (p == HL_RUNNING)
			want_cancel(l);
		return 0;
	case HE_TURN:
		return on_turn(l);
	case HE_CHOICE_WRITTEN:
		if (p == HL_ENDED)
			l->phase = HL_WAITING;
		return 0;
	case HE_ANSWERED:
		if (p != HL_RUNNING)
			l->phase = HL_DONE;
		return 0;
	case HE_EVENTS:
		break;
	}
	return 0;
}

const char *headd_life_phase_name(enum headd_life_phase p)
{
	static const char *const names[HL_PHASES] = {
		[HL_TOKENIZING] = "tokenizing", [HL_TRANSCRIBING] = "transcribing",
		[HL_RUNNING] = "running", [HL_ENDED] = "ended", [HL_WAITING] = "waiting",
		[HL_DONE] = "done",
	};
	return (unsigned)p < HL_PHASES && names[p] ? names[p] : "?";
}

const char *headd_life_event_name(enum headd_life_event ev)
{
	static const char *const names[HE_EVENTS] = {
		[HE_STARTED] = "started", [HE_FAILED] = "failed", [HE_OUTPUT] = "output",
		[HE_OUTPUT_COMPLETE] = "output-complete", [HE_FINISHED] = "finished",
		[HE_CANCEL] = "cancel", [HE_STREAM_BEGUN] = "stream-begun",
		[HE_CLIENT_GONE] = "client-gone", [HE_CUT] = "cut", [HE_TURN] = "turn",
		[HE_CHOICE_WRITTEN] = "choice-written", [HE_ANSWERED] = "answered",
	};
	return (unsigned)ev < HE_EVENTS && names[ev] ? names[ev] : "?";
}
