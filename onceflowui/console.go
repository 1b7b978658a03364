package onceflowui

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/internal/bodybudget"
	"github.com/onceflow/onceflow/internal/reqlog"
	"github.com/onceflow/onceflow/onceflowhttp"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config configures a Console.
type Config struct {
	// Client is the client the API serves (required): the console reads and acts through
	// it, and what it reads is masked by the client's policy (its Config.Redact and each
	// workflow's Redact).
	Client *onceflow.Client
	// Tokens are the API tokens people sign in with: scope read views, admin acts.
	Tokens []onceflowhttp.Token
	// Prefix is the path the console is served under (default "/ui").
	Prefix string
	// SessionTTL is how long a sign-in lasts at most (default 8h), SessionIdle how long it
	// lasts without a request (default 1h). Sessions are kept in the client's store, so
	// that every process sharing the database sees them end.
	SessionTTL  time.Duration
	SessionIdle time.Duration
	// SignInFailures is how many sign-ins may fail from one client address at once
	// (default 5), and SignInWindow how long it takes to earn them all back (default 1m):
	// past that, the address's sign-ins are answered 429 with Retry-After until it may try
	// again. Failures are logged at warn level with the address, never the token.
	SignInFailures int
	SignInWindow   time.Duration
	// OIDC, when set, lets people sign in with OpenID Connect, as themselves
	// (user:EMAIL), with the roles the provider's claim gives them.
	OIDC *OIDC
	// NoTokenSignIn refuses signing in to the console with an API token (the tokens still
	// serve the API), for a console whose people sign in with OpenID Connect.
	NoTokenSignIn bool
	// SecureCookies marks the session cookie Secure even on plain-HTTP connections, for a
	// console behind a TLS-terminating proxy. On TLS connections it is always Secure.
	SecureCookies bool
	Logger        *slog.Logger
	// Now is the clock that decides which steps are due, the ages shown and when sessions
	// expire (default: the client's, Client.Now, which is the database's clock on
	// PostgreSQL, so that every process agrees).
	Now func() time.Time
	// MaxBodyMemory caps the form bodies held in memory at once, across requests (as
	// onceflowhttp.Options.MaxBodyMemory does for the API): a request that finds no room
	// within a second is answered 503 with Retry-After, its form unread. Default: 8 MiB.
	MaxBodyMemory int64
	// MaxExport bounds an audit export: the newest events its filter selects, up to this
	// many (100,000 when zero); an export that stops there says so in its last record.
	MaxExport int
}

// Console serves the web console.
type Console struct {
	cfg   Config
	log   *slog.Logger
	pages map[string]*template.Template
	mux   *http.ServeMux
	h     http.Handler
	// bodies bounds the forms held in memory at once (Config.MaxBodyMemory; readForm).
	bodies *bodybudget.Budget
	// signIns counts failed sign-ins per client address (Config.SignInFailures).
	signIns *signInLimit
	// oidc is the OpenID Connect sign-in (Config.OIDC), or nil.
	oidc *oidcSignIn
}

// pageNames are the templates, each parsed with layout.html.
var pageNames = []string{"login", "overview", "runs", "run", "review", "item", "bulk", "keys", "sessions", "audit", "schedules", "confirm", "error"}

// New returns a Console for cfg; the error says what is wrong with cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Client == nil {
		return nil, errors.New("onceflowui: Config.Client is required (onceflow.New)")
	}
	if cfg.MaxExport <= 0 {
		cfg.MaxExport = defaultMaxExport
	}
	if cfg.MaxBodyMemory <= 0 {
		cfg.MaxBodyMemory = 8 << 20
	}
	cfg.Prefix = "/" + strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix == "/" {
		cfg.Prefix = "/ui"
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = time.Hour
	}
	if cfg.SignInFailures <= 0 {
		cfg.SignInFailures = 5
	}
	if cfg.SignInWindow <= 0 {
		cfg.SignInWindow = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Client.Now
	}
	if cfg.OIDC != nil {
		if err := cfg.OIDC.check(cfg.Prefix); err != nil {
			return nil, err
		}
	}
	if cfg.NoTokenSignIn && cfg.OIDC == nil {
		return nil, errors.New("onceflowui: Config.NoTokenSignIn leaves no way to sign in without Config.OIDC")
	}
	cfg.Logger = slog.New(cfg.Client.LogHandler(cfg.Logger.Handler()))
	c := &Console{cfg: cfg, log: cfg.Logger, pages: map[string]*template.Template{}, mux: http.NewServeMux(),
		bodies: bodybudget.New(max(cfg.MaxBodyMemory, maxForm)), signIns: newSignInLimit(cfg.SignInFailures, cfg.SignInWindow)}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(c.funcs()).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("onceflowui: page %s: %w", name, err)
		}
		c.pages[name] = t
	}
	if cfg.OIDC != nil {
		c.oidc = newOIDCSignIn(*cfg.OIDC)
	}
	c.routes()
	c.h = c.bodies.Hold(c.logRequests(http.NewCrossOriginProtection().Handler(c.secure(c.mux))))
	return c, nil
}

// Handler returns the console's routes, all under Config.Prefix.
func (c *Console) Handler() http.Handler { return c.h }

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

func (c *Console) routes() {
	p := c.cfg.Prefix
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET "+p+"/static/", http.StripPrefix(p+"/static/", cacheStatic(http.FileServerFS(static))))
	c.mux.Handle("GET "+p+"/login", c.handle(c.loginPage))
	c.mux.Handle("POST "+p+"/login", c.handle(c.login))
	c.mux.Handle("POST "+p+"/logout", c.act(false, c.logout))
	if c.oidc != nil {
		c.mux.Handle("GET "+p+"/oidc/login", c.handle(c.oidcLogin))
		c.mux.Handle("GET "+p+"/oidc/callback", c.handle(c.oidcCallback))
	}
	c.mux.Handle("GET "+p+"/{$}", c.view(c.overview))
	c.mux.Handle("GET "+p, http.RedirectHandler(p+"/", http.StatusMovedPermanently))
	c.mux.Handle("GET "+p+"/runs", c.view(c.runs))
	c.mux.Handle("GET "+p+"/runs/live", c.view(c.runs)) // the list again, for its live region
	c.mux.Handle("GET "+p+"/runs/{id}", c.view(c.run))
	c.mux.Handle("GET "+p+"/runs/{id}/live", c.view(c.runLive))
	c.mux.Handle("POST "+p+"/runs/{id}/cancel", c.act(true, c.runCancel))
	c.mux.Handle("POST "+p+"/runs/{id}/reveal", c.act(true, c.runReveal))
	c.mux.Handle("POST "+p+"/workflows/{name}/pause", c.act(true, c.workflowPause(true)))
	c.mux.Handle("POST "+p+"/workflows/{name}/resume", c.act(true, c.workflowPause(false)))
	c.mux.Handle("GET "+p+"/review", c.view(c.review))
	c.mux.Handle("GET "+p+"/review/live", c.view(c.review)) // the list again, for its live region
	c.mux.Handle("GET "+p+"/review/{run}/{step}", c.view(c.item))
	c.mux.Handle("GET "+p+"/review/{run}/{step}/live", c.view(c.itemLive))
	c.mux.Handle("POST "+p+"/review/{run}/{step}/preview", c.act(true, c.replayPreview))
	c.mux.Handle("POST "+p+"/review/{run}/{step}/{action}", c.act(true, c.itemAct))
	c.mux.Handle("POST "+p+"/review/bulk", c.act(true, c.bulk))
	c.mux.Handle("GET "+p+"/keys", c.view(c.keys))
	c.mux.Handle("GET "+p+"/schedules", c.view(c.schedules))
	c.mux.Handle("POST "+p+"/schedules/{schedule}/preview", c.act(true, c.schedulePreview))
	c.mux.Handle("POST "+p+"/schedules/{schedule}/trigger", c.act(true, c.scheduleTrigger))
	c.mux.Handle("GET "+p+"/sessions", c.view(c.sessions))
	c.mux.Handle("POST "+p+"/sessions/{sid}/end", c.act(true, c.sessionEnd))
	c.mux.Handle("GET "+p+"/audit", c.view(c.audit))
	c.mux.Handle("GET "+p+"/audit/export.csv", c.view(c.auditExport("csv")))
	c.mux.Handle("GET "+p+"/audit/export.json", c.view(c.auditExport("json")))
	c.mux.Handle(p+"/", c.handle(func(w http.ResponseWriter, r *http.Request) error {
		return &pageError{Status: http.StatusNotFound, Title: "Not found", Detail: r.URL.Path + " is not a page of the console"}
	}))
}

// secure adds the headers every answer carries: a Content-Security-Policy that admits
// only the console's own script and style sheet, and no framing, sniffing or referrers.
func (c *Console) secure(next http.Handler) http.Handler {
	const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func cacheStatic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// pageError is an error shown as a page with its status.
type pageError struct {
	Status int
	Title  string
	Detail string
}

func (e *pageError) Error() string { return e.Title + ": " + e.Detail }

// Form sizes: an action's form (a merge patch, a resolved output) and the sign-in form.
const (
	maxForm      = 1 << 20
	maxLoginForm = 64 << 10
)

// readForm parses r's form, at most limit bytes, after taking its size from the budget of
// forms held in memory; a full budget is a 503 with Retry-After, the form unread.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request, limit int64) error {
	if err := c.bodies.Take(r, limit); err != nil {
		if !errors.Is(err, bodybudget.ErrFull) {
			return err
		}
		c.log.Warn("console request refused: the forms held in memory are at their limit", "route", r.Pattern)
		w.Header().Set("Retry-After", "1")
		return &pageError{Status: http.StatusServiceUnavailable, Title: "Busy",
			Detail: "the console is reading as many forms as it may at once; try again in a moment. Nothing was changed."}
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	return r.ParseForm()
}

// handlerFunc is a page handler that returns an error; errors become error pages.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h: a *pageError is shown as it is; a database that cannot be reached
// (onceflow.ErrUnavailable) is logged at warn level and shown as a 503 with Retry-After; any
// other error is logged and shown as a 500 that reveals nothing.
func (c *Console) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var pe *pageError
		if !errors.As(err, &pe) {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				pe = &pageError{Status: http.StatusRequestEntityTooLarge, Title: "Request too large", Detail: fmt.Sprintf("the form is larger than %d bytes", mbe.Limit)}
			} else if errors.Is(err, onceflow.ErrUnavailable) {
				c.log.Warn("database unavailable; answered 503", "method", r.Method, "route", r.Pattern, "error", err)
				w.Header().Set("Retry-After", "5")
				pe = &pageError{Status: http.StatusServiceUnavailable, Title: "Database unavailable",
					Detail: "the database cannot be reached right now; nothing was changed; reload the page in a few seconds"}
			} else {
				c.log.Error("console request failed", "method", r.Method, "route", r.Pattern, "error", err)
				pe = &pageError{Status: http.StatusInternalServerError, Title: "Internal error", Detail: "the page could not be shown; nothing was changed"}
			}
		}
		mask := c.cfg.Client.MaskSecrets
		pe = &pageError{Status: pe.Status, Title: mask(pe.Title), Detail: mask(pe.Detail)}
		c.render(w, r, pe.Status, "error", pe)
	})
}

// page is what every template receives: the page's own data and the session.
type page struct {
	Prefix  string
	Title   string
	Nav     string
	Session *session
	CSRF    string
	// Flash is the banner of the action just taken (bannerOf): never text from the request.
	Flash string
	Data  any
}

// render executes the page template name with data; status is the HTTP status.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	sess := sessionFrom(r)
	if sess == nil && name != "login" {
		sess, _ = c.readSession(r) // an error page of a request refused before its session was attached
	}
	p := page{Prefix: c.cfg.Prefix, Nav: name, Session: sess, Data: data, Flash: bannerOf(data, r.URL.Query())}
	if sess != nil {
		p.CSRF = sess.csrf
	}
	if t, ok := data.(interface{ title() string }); ok {
		p.Title = t.title()
	}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		c.log.Error("console template failed", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderFragment executes one named template of page name alone, for live updates.
func (c *Console) renderFragment(w http.ResponseWriter, r *http.Request, name, fragment string, data any) error {
	sess := sessionFrom(r)
	p := page{Prefix: c.cfg.Prefix, Session: sess, Data: data}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, fragment, p); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write(buf.Bytes())
	return err
}

func (e *pageError) title() string { return e.Title }

// logRequests logs one line per request, as the API does: the method, the route pattern
// (never the path, the query, a header or the form), the status and the duration; static
// assets and live refreshes at debug level.
func (c *Console) logRequests(next http.Handler) http.Handler {
	return reqlog.Logger{Log: c.log, Message: "console request", Debug: func(route string) bool {
		return strings.HasSuffix(route, "/live") || strings.Contains(route, "/static/")
	}}.Wrap(next)
}
