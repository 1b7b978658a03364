// Package auditgolden drives the scenarios of the golden audit test and of the upgrade
// test, and renders what every front-end shows of their audit trails.
//
// A scenario (Scenario) is a short story told to the engine on a fresh database: starts,
// Work, Reap, FireSchedules and operators' actions, on a manual clock (whole milliseconds,
// UTC) that the engine reads as it is, with one worker, a fixed worker id and a fixed
// jitter, so that every event's id, time and detail is the same on every run. Render then
// writes, as text, the events as Store.EventList returns them (unfiltered in small pages,
// and by run, entity, key and time range), each explained by onceflow.Explain, as GET
// /v1/audit serves them (a real onceflowhttp server), as the console's events tables show
// them (a real onceflowui server, signed in with a read token) and as `onceflow audit
// --json` prints them (run by the caller, which owns the command). Times are written as
// offsets from the scenario's base time; a time that no clock of the scenario could have
// produced fails the rendering instead of being hidden.
//
// The upgrade fixture is the every-state story (BuildEveryState, FinishEveryState): a
// database holding runs in every state, dumped as SQL text with the schema of the release
// that wrote it (Dump), loaded into an empty database (Load) for the current code to
// migrate and finish.
//
// The scenarios hold no secrets and no personal data: what a front-end masks is the same
// whichever front-end masks it.
package auditgolden
