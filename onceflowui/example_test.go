package onceflowui_test

import (
	"context"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/onceflow/onceflow"
	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/onceflowui"
	"github.com/onceflow/onceflow/store/sqlite"
)

// A program that embeds onceflow serves the console beside the API, over the same client
// and store, with the same tokens.
func ExampleNew() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, "shop.db", sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	client, err := onceflow.New(onceflow.Config{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	// e.g. "finance:read:…,ops:admin:…"
	tokens, err := onceflowhttp.ParseTokens(os.Getenv("ONCEFLOW_API_TOKENS"))
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	api, err := onceflowhttp.NewHandler(client, onceflowhttp.Options{Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/", api)
	console, err := onceflowui.New(onceflowui.Config{Client: client, Tokens: tokens})
	if err != nil {
		log.Fatal(err)
	}
	mux.Handle("/ui/", console)
	hs := onceflowhttp.HTTPServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:8080")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(hs.Serve(onceflowhttp.LimitListener(hs, ln, 0)))
}
