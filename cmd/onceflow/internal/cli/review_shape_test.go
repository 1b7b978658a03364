package cli

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
)

// review list --json and review show --json print an item as the API answers it: the same
// members with the same values, left out under the same rules; only the API's links (and
// the age, which moves between the two reads) are not compared.
func TestReviewItemJSONIsTheAPIShape(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := strconv.FormatInt(f.runID, 10)

	st := openSQLite(t, strings.TrimPrefix(f.db, "sqlite://"))
	defer st.Close()
	c, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := onceflowhttp.ParseTokens("ops:admin:admin-secret-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	api, err := onceflowhttp.NewHandler(c, onceflowhttp.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) []byte {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer admin-secret-0123456789")
		rec := httptest.NewRecorder()
		apiMiddleware(api).ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	item := func(raw json.RawMessage) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		delete(m, "age_seconds")
		return m
	}
	same := func(what string, cli, api json.RawMessage) {
		t.Helper()
		c, a := item(cli), item(api)
		if _, ok := a["links"]; !ok {
			t.Fatalf("the API's item has no links: %s", api)
		}
		delete(a, "links")
		if !reflect.DeepEqual(c, a) {
			t.Errorf("%s differs from the API's item:\n cli %v\n api %v", what, c, a)
		}
	}

	var list []json.RawMessage
	if err := json.Unmarshal([]byte(runOK(t, "review", "list", "--db", f.db, "--json").stdout), &list); err != nil || len(list) != 1 {
		t.Fatalf("review list --json: %v, %d items", err, len(list))
	}
	var apiList struct{ Items []json.RawMessage }
	if err := json.Unmarshal(get("/v1/review"), &apiList); err != nil || len(apiList.Items) != 1 {
		t.Fatalf("GET /v1/review: %v, %d items", err, len(apiList.Items))
	}
	same("review list --json", list[0], apiList.Items[0])

	var show, apiShow struct {
		Item     json.RawMessage
		Attempts []map[string]any
	}
	if err := json.Unmarshal([]byte(runOK(t, "review", "show", id, "charge", "--db", f.db, "--json").stdout), &show); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(get("/v1/review/"+id+"/charge"), &apiShow); err != nil {
		t.Fatal(err)
	}
	same("review show --json", show.Item, apiShow.Item)
	if len(show.Attempts) == 0 || !reflect.DeepEqual(show.Attempts, apiShow.Attempts) {
		t.Errorf("review show --json's attempts differ from the API's:\n cli %v\n api %v", show.Attempts, apiShow.Attempts)
	}
	if keys := slices.Collect(maps.Keys(item(show.Item))); len(keys) < 10 {
		t.Errorf("the item has only %v", keys)
	}
}
