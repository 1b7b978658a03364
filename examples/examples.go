// Package examples holds the example workflow files that ship with onceflow:
//
//   - website-lead.yaml: a website form becomes a CRM lead, a welcome e-mail, a WhatsApp
//     notice and a sales task;
//   - payment-webhook.yaml: a signed payment webhook marks an order paid, reserves its
//     stock, issues the invoice and e-mails a receipt;
//   - monthly-invoices.yaml: a monthly schedule fans out over the customers of a billing
//     system and issues one invoice per customer, period and invoice type;
//   - lead-follow-up.yaml: a follow-up a day after a lead came in, unless it was already
//     contacted, and a reminder before the appointment it booked (delay, not_before).
//
// The files are embedded so that programs run exactly the files people read: `onceflow
// demo` serves them against simulated services, and `onceflow serve --workflows examples`
// serves them from disk.
package examples

import (
	"embed"
	"io/fs"
)

// FS holds the example workflow files, *.yaml, at its root.
//
//go:embed *.yaml
var FS embed.FS

// Files returns the contents of every example file by file name, such as
// "website-lead.yaml".
func Files() map[string][]byte {
	names, err := fs.Glob(FS, "*.yaml")
	if err != nil {
		panic(err) // the pattern is constant and valid
	}
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := FS.ReadFile(n)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		out[n] = b
	}
	return out
}
