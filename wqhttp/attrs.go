package wqhttp

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/gowq/wq"
)

// AttrsReport is the body of /attrs?format=json.
type AttrsReport struct {
	// Global holds the process-wide attributes (wq.GlobalAttrNames).
	Global map[string]string `json:"global"`
	// Workqueues holds the attributes of each Sysfs workqueue, by name.
	Workqueues []QueueAttrs `json:"workqueues"`
}

// QueueAttrs are one Sysfs workqueue's attributes.
type QueueAttrs struct {
	Name  string            `json:"name"`
	Attrs map[string]string `json:"attrs"`
	order []string
}

// maxAttrBody bounds the body of an attribute write.
const maxAttrBody = 4 << 10

// globalDir is the path component of the process-wide attributes.
const globalDir = "global"

func globalAttrs() map[string]string {
	m := map[string]string{}
	for _, n := range wq.GlobalAttrNames() {
		if v, err := wq.GlobalAttr(n); err == nil {
			m[n] = v
		}
	}
	return m
}

func queueAttrs(q *wq.Workqueue) QueueAttrs {
	qa := QueueAttrs{Name: q.Name(), Attrs: map[string]string{}, order: q.AttrNames()}
	for _, n := range qa.order {
		if v, err := q.Attr(n); err == nil {
			qa.Attrs[n] = v
		}
	}
	return qa
}

// sysfsQueues returns the live Sysfs workqueues named name.
func sysfsQueues(name string) []*wq.Workqueue {
	var out []*wq.Workqueue
	for _, q := range wq.Queues(true) {
		if q.Name() == name {
			out = append(out, q)
		}
	}
	return out
}

func (h *handler) attrsGet(w http.ResponseWriter, r *http.Request) {
	if !checkFormat(w, r) {
		return
	}
	path := strings.Trim(r.PathValue("path"), "/")
	switch {
	case path == "":
		rep := AttrsReport{Global: globalAttrs(), Workqueues: []QueueAttrs{}}
		for _, q := range wq.Queues(true) {
			rep.Workqueues = append(rep.Workqueues, queueAttrs(q))
		}
		if wantJSON(r) {
			writeJSON(w, rep)
			return
		}
		textHeader(w)
		var b strings.Builder
		writeAttrBlock(&b, globalDir, wq.GlobalAttrNames(), rep.Global)
		for _, qa := range rep.Workqueues {
			writeAttrBlock(&b, "workqueue "+qa.Name, qa.order, qa.Attrs)
		}
		_, _ = io.WriteString(w, b.String())
		return
	case path == globalDir:
		g := globalAttrs()
		if wantJSON(r) {
			writeJSON(w, g)
			return
		}
		textHeader(w)
		var b strings.Builder
		writeAttrBlock(&b, globalDir, wq.GlobalAttrNames(), g)
		_, _ = io.WriteString(w, b.String())
		return
	}
	if qs := sysfsQueues(path); len(qs) > 0 {
		qa := queueAttrs(qs[0])
		if wantJSON(r) {
			writeJSON(w, qa)
			return
		}
		textHeader(w)
		var b strings.Builder
		writeAttrBlock(&b, "workqueue "+qa.Name, qa.order, qa.Attrs)
		_, _ = io.WriteString(w, b.String())
		return
	}
	dir, attr, ok := cutLast(path)
	if !ok {
		http.Error(w, fmt.Sprintf("wqhttp: no Sysfs workqueue %q", path), http.StatusNotFound)
		return
	}
	var v string
	var err error
	if dir == globalDir {
		if !slices.Contains(wq.GlobalAttrNames(), attr) {
			http.Error(w, fmt.Sprintf("wqhttp: no global attribute %q", attr), http.StatusNotFound)
			return
		}
		v, err = wq.GlobalAttr(attr)
	} else {
		qs := sysfsQueues(dir)
		if len(qs) == 0 {
			http.Error(w, fmt.Sprintf("wqhttp: no Sysfs workqueue %q", dir), http.StatusNotFound)
			return
		}
		if !slices.Contains(qs[0].AttrNames(), attr) {
			http.Error(w, fmt.Sprintf("wqhttp: workqueue %q has no attribute %q", dir, attr), http.StatusNotFound)
			return
		}
		v, err = qs[0].Attr(attr)
	}
	if err != nil {
		http.Error(w, err.Error(), errorStatus(err))
		return
	}
	if wantJSON(r) {
		writeJSON(w, map[string]string{attr: v})
		return
	}
	textHeader(w)
	_, _ = io.WriteString(w, v+"\n") // like cat of a sysfs file
}

// writeAttrBlock writes "title\n  name = value\n..." in names' order.
func writeAttrBlock(b *strings.Builder, title string, names []string, m map[string]string) {
	b.WriteString(title)
	b.WriteByte('\n')
	for _, n := range names {
		if v, ok := m[n]; ok {
			fmt.Fprintf(b, "  %s = %s\n", n, v)
		}
	}
}

// cutLast splits "a/b/c" into "a/b" and "c"; queue names may contain '/'
// (as the kernel's do), attribute names never do.
func cutLast(p string) (dir, name string, ok bool) {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 || i == len(p)-1 {
		return "", "", false
	}
	return p[:i], p[i+1:], true
}

// errorStatus maps a wq attribute error to an HTTP status.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, wq.ErrReadOnly):
		return http.StatusConflict
	case errors.Is(err, wq.ErrPermission):
		return http.StatusForbidden
	case errors.Is(err, wq.ErrDestroyed):
		return http.StatusGone
	case errors.Is(err, wq.ErrThreadLimit):
		// The write could not be tried on a thread: the process is at a
		// thread limit. Nothing is wrong with the request; retry later.
		return http.StatusServiceUnavailable
	case errors.Is(err, wq.ErrInvalidArgument), errors.Is(err, wq.ErrInvalidFlags):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func (h *handler) attrsWrite(w http.ResponseWriter, r *http.Request) {
	if !h.opts.AllowWrites {
		http.Error(w, "wqhttp: attribute writes are disabled (wqhttp.Options.AllowWrites is false)", http.StatusForbidden)
		return
	}
	dir, attr, ok := cutLast(strings.Trim(r.PathValue("path"), "/"))
	if !ok {
		http.Error(w, "wqhttp: write to /attrs/<queue>/<attr> or /attrs/global/<attr>", http.StatusNotFound)
		return
	}
	var qs []*wq.Workqueue
	if dir == globalDir {
		if !slices.Contains(wq.GlobalAttrNames(), attr) {
			http.Error(w, fmt.Sprintf("wqhttp: no global attribute %q", attr), http.StatusNotFound)
			return
		}
	} else {
		qs = sysfsQueues(dir)
		if len(qs) == 0 {
			http.Error(w, fmt.Sprintf("wqhttp: no Sysfs workqueue %q", dir), http.StatusNotFound)
			return
		}
		if !slices.Contains(qs[0].AttrNames(), attr) {
			http.Error(w, fmt.Sprintf("wqhttp: workqueue %q has no attribute %q", dir, attr), http.StatusNotFound)
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAttrBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("wqhttp: value longer than %d bytes", maxAttrBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "wqhttp: reading the value: "+err.Error(), http.StatusBadRequest)
		return
	}
	value := strings.TrimSpace(string(body))
	var nv string
	if dir == globalDir {
		if err = wq.SetGlobalAttr(attr, value); err == nil {
			nv, err = wq.GlobalAttr(attr)
		}
	} else {
		// Queues sharing a name (wq allows it, the kernel's sysfs does not)
		// are all written, all or nothing: wq.SetAttrQueues puts back the
		// exact state (every attribute and the class in force) of the
		// queues written before one refuses, with other attribute writers
		// held off meanwhile.
		err = wq.SetAttrQueues(qs, attr, value)
		if err == nil {
			nv, err = qs[0].Attr(attr)
		}
	}
	if err != nil {
		http.Error(w, err.Error(), errorStatus(err))
		return
	}
	textHeader(w)
	_, _ = io.WriteString(w, nv+"\n")
}
