package cacheprune

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// Summary counts a prune's tags by what was done with them, and the
// repositories and tags that failed.
type Summary struct {
	Removed, WouldRemove, Kept, Failed int
	// FailedRepositories could not be listed.
	FailedRepositories int
}

// Summarize counts results.
func Summarize(results []Repository) Summary {
	var s Summary
	for _, r := range results {
		if r.Error != "" {
			s.FailedRepositories++
		}
		for _, t := range r.Tags {
			switch t.Action {
			case Removed:
				s.Removed++
			case WouldRemove:
				s.WouldRemove++
			case Failed:
				s.Failed++
			default:
				s.Kept++
			}
		}
	}
	return s
}

// Err is an error when a repository could not be listed or a tag could not
// be removed, nil otherwise.
func (s Summary) Err() error {
	if s.FailedRepositories == 0 && s.Failed == 0 {
		return nil
	}
	return fmt.Errorf("%d repositories could not be listed and %d tags could not be removed (see above)", s.FailedRepositories, s.Failed)
}

// WriteTable writes results as a table (REPOSITORY, TAG, CREATED, ACTION)
// followed by a summary; a dry run (confirm false) says that nothing was
// removed and how to remove.
func WriteTable(w io.Writer, results []Repository, keepYoungerThan time.Duration, confirm bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "REPOSITORY\tTAG\tCREATED\tACTION")
	for _, r := range results {
		if r.Error != "" {
			_, _ = fmt.Fprintf(tw, "%s\t-\t-\tfailed: %s\n", r.Repository, oneLine(r.Error))
			continue
		}
		if len(r.Tags) == 0 {
			_, _ = fmt.Fprintf(tw, "%s\t-\t-\tno tags\n", r.Repository)
		}
		for _, t := range r.Tags {
			created := "-"
			if t.Created != nil {
				created = t.Created.UTC().Format(time.RFC3339)
			}
			action := string(t.Action)
			if t.Reason != "" {
				action += ": " + oneLine(t.Reason)
			}
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Repository, printable(t.Tag), created, action)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	s := Summarize(results)
	var err error
	if confirm {
		_, err = fmt.Fprintf(w, "\nRemoved %d cache tags created more than %s ago; kept %d tags; %d failed.\n",
			s.Removed, keepYoungerThan, s.Kept, s.Failed+s.FailedRepositories)
	} else {
		_, err = fmt.Fprintf(w, "\nDry run: nothing was removed. %d cache tags created more than %s ago would be removed; %d tags kept; %d failed. "+
			"Pass --confirm to remove them.\n", s.WouldRemove, keepYoungerThan, s.Kept, s.FailedRepositories)
	}
	return err
}

// WriteJSON writes results as a JSON list.
func WriteJSON(w io.Writer, results []Repository) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

// oneLine keeps a registry's message on the table's row.
func oneLine(s string) string {
	return printable(strings.Join(strings.Fields(s), " "))
}

// printable returns s, quoted when it holds a character that is not
// printable: a tag or message from a registry never reaches the terminal
// as control sequences.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}
