// Package onceflowui is onceflow's web console: server-rendered pages over the same
// *onceflow.Client the JSON API (package onceflowhttp) uses, for the people who look after
// runs and act on the review queue. It reads and acts through the client alone, whose read
// API masks what the pages show.
//
// # Pages
//
// The overview counts runs by workflow and state, the review queue by reason and the last
// hour's throughput and failures; beside each workflow it shows whether the workflow is
// paused (since when, by whom, with which note) and pauses or resumes it
// (onceflow.Client.PauseWorkflow, ResumeWorkflow). The runs page filters runs by workflow, state, entity,
// run key and creation time; a run's page draws its steps as a graph in dependency order,
// lists every attempt (time, worker, outcome class, destination status, masked excerpt),
// explains its audit trail, shows its input with every correction as a diff and cancels the
// run (onceflow.Client.CancelRun) while a step is still to be done or decided. The review
// queue filters the parked steps and acts on them one by one or in bulk (retry, resolve
// with an output, abandon, correct and replay), always after a preview computed by the
// engine itself (onceflow.Client.ReviewPreview, ReviewBulk with DryRun), and a
// confirmation acts on exactly what was previewed: a replay carries its plan's digest
// (ReplayRequest.PlanDigest) and the page marks a preview stale once its correction is
// edited; a bulk confirmation names the items of its preview with their versions
// (BulkRequest.Items), so an item that changed since is refused and one that arrived since
// is not touched. Cancel, abandon and pause show what will happen and act only once
// confirmed. Banners after an action come from a fixed set of codes, never from the
// link. The key page
// answers whether an effect key's business action happened, when, by which run and with
// which result. The sessions page (for admins of every workflow) lists who is signed in,
// from which address, since when, and ends a session. Pages that show something still
// moving refresh themselves.
//
// # Security
//
// People sign in with an API token (onceflowhttp.Token) of scope read (view only) or admin
// (view and act); ingest-only tokens are refused. With Config.OIDC they sign in at an
// OpenID Connect provider instead (authorization code flow with PKCE, state and nonce
// checked) and act as themselves, user:EMAIL, with the roles the provider's claim maps to
// (OIDCRole): read, admin, or admin of some workflows only, whose actions on the others are
// refused and not offered. Failed sign-ins are limited per client address
// (Config.SignInFailures). Sessions are kept in the client's store
// (onceflow.Client.SessionStart), so that every process sharing the database sees them:
// the cookie (HttpOnly, SameSite=Strict, Secure on TLS connections or when
// Config.SecureCookies is set) holds only a random secret, the store its SHA-256. Signing
// out, an admin's "end session" on the sessions page, Config.SessionIdle without a request
// and Config.SessionTTL after the sign-in end a session in every process at once; a copy
// of the cookie is refused from then on. Removing or rotating a token ends its sessions.
// Every state-changing request carries a CSRF token bound to the session and is checked
// against cross-origin requests as well.
// Pages are sent with a Content-Security-Policy that admits only the console's own script
// and style sheet, embedded in the binary: nothing is loaded from another host. Every
// action, and every sign-in and sign-out (onceflow.EventConsoleSignedIn, EventConsoleSignedOut),
// is written to the audit trail with the actor token:NAME, as the API does, with the
// session's short name and the client's address in each event's detail, and
// everything shown about a run is masked by the same redaction policy as the API's answers.
package onceflowui
