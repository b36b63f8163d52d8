package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gowq/wq/lab/e2e"
)

// e2eScenario returns the e2e experiment's name when the --scenario flag
// selects it alone ("e2e" or "e2e-seq"), else "".
func e2eScenario(scenarios []string) string {
	if len(scenarios) != 1 {
		return ""
	}
	switch s := strings.TrimSpace(scenarios[0]); s {
	case e2e.Name, e2e.NameSeq:
		return s
	}
	return ""
}

// runE2E runs the end-to-end experiment (lab/e2e) and writes, into
// f.out, results.json, results.txt, e2e-fio.txt and index.html.
func runE2E(ctx context.Context, name string, f *runFlags, stdout, stderr io.Writer) error {
	o := e2e.Options{Sequential: name == e2e.NameSeq, Configs: f.configs, Log: stderr}
	if f.quick {
		o.Pass, o.CorpusBytes = 250*time.Millisecond, 8<<20
	}
	if f.duration > 0 {
		o.Pass = f.duration
	}
	o.Source = f.erofsSrc
	e := e2e.Experiment(o)
	if err := e.Validate(); err != nil {
		return err
	}
	r, err := e.Run(ctx)
	if err != nil {
		return &runFailure{err}
	}
	res := r.(*e2e.Result)
	var txt, js, fio, html bytes.Buffer
	err = errors.Join(res.WriteTable(&txt), res.WriteJSON(&js), res.WriteFio(&fio), res.WriteHTML(&html))
	if err != nil {
		return &runFailure{err}
	}
	if f.json {
		stdout.Write(js.Bytes())
	} else {
		stdout.Write(txt.Bytes())
	}
	if f.out == "" {
		return nil
	}
	err = os.MkdirAll(f.out, 0o755)
	for _, w := range []struct {
		name string
		b    []byte
	}{{"results.json", js.Bytes()}, {"results.txt", txt.Bytes()}, {"e2e-fio.txt", fio.Bytes()}, {"index.html", html.Bytes()}} {
		if err == nil {
			err = os.WriteFile(filepath.Join(f.out, w.name), w.b, 0o644)
		}
	}
	if err != nil {
		return &runFailure{fmt.Errorf("writing %s: %w", f.out, err)}
	}
	if !f.json {
		fmt.Fprintf(stdout, "\nresults written to %s/ (index.html, results.json, results.txt, e2e-fio.txt)\n", f.out)
	}
	return nil
}
