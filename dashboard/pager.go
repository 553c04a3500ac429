package dashboard

import (
	"net/url"
	"slices"
	"strconv"
)

// Keyset pages going back. A driver's cursor only reads forward (the rows
// after it), so a page's links carry the trail of cursors that led to it:
// "after" is the page's own cursor, "back" repeats the cursors of the
// pages between the first and this one (oldest first), and "page" numbers
// it. Previous pops the trail; First drops it. No page is ever read by
// offset. The trail keeps the last maxTrail cursors: on a page deeper than
// that, Previous walks back maxTrail pages and then only First is offered.

// maxTrail bounds the cursors a page's links carry.
const maxTrail = 50

// pageRef is where a list page is: its cursor, the trail back to the first
// page, and its number.
type pageRef struct {
	After string   // the page's keyset cursor; "" on the first page
	Back  []string // cursors of pages 2 .. Page-1, oldest first; may be cut
	// Page is the 1-based page number; 0 when unknown (a cursor from the
	// API or an old link).
	Page int
}

// readPageRef reads the page position from a list URL.
func readPageRef(v url.Values) pageRef {
	ref := pageRef{After: clip(v.Get("after"))}
	ref.Page, _ = strconv.Atoi(v.Get("page"))
	if ref.After == "" {
		// Page numbers alone (cookbook mode) need no cursors.
		ref.Page = max(ref.Page, 1)
		return ref
	}
	if ref.Page < 2 {
		ref.Page = 0
	}
	for _, c := range v["back"] {
		if c = clip(c); c != "" {
			ref.Back = append(ref.Back, c)
		}
	}
	if len(ref.Back) > maxTrail {
		ref.Back = ref.Back[len(ref.Back)-maxTrail:]
	}
	if ref.Page > 0 && len(ref.Back) > ref.Page-2 {
		// More cursors than pages before this one: keep the nearest.
		ref.Back = ref.Back[len(ref.Back)-(ref.Page-2):]
	}
	return ref
}

// set writes ref into v (a copy of the list's filters).
func (ref pageRef) set(v url.Values) url.Values {
	v.Del("after")
	v.Del("back")
	v.Del("page")
	if ref.After != "" {
		v.Set("after", ref.After)
		if len(ref.Back) > 0 {
			v["back"] = slices.Clone(ref.Back)
		}
	}
	if ref.Page > 1 {
		v.Set("page", strconv.Itoa(ref.Page))
	}
	return v
}

// next is the page after ref, whose cursor is cursor.
func (ref pageRef) next(cursor string) pageRef {
	n := pageRef{After: cursor}
	if ref.After != "" {
		n.Back = append(slices.Clone(ref.Back), ref.After)
		if len(n.Back) > maxTrail {
			n.Back = n.Back[len(n.Back)-maxTrail:]
		}
	}
	if ref.Page > 0 {
		n.Page = ref.Page + 1
	}
	return n
}

// prev is the page before ref; ok is false on the first page and when the
// trail does not reach back (only the first page can be offered then).
func (ref pageRef) prev() (p pageRef, ok bool) {
	switch {
	case ref.After == "":
		return pageRef{}, false
	case ref.Page == 2:
		return pageRef{Page: 1}, true
	case len(ref.Back) == 0:
		return pageRef{}, false
	}
	last := len(ref.Back) - 1
	p = pageRef{After: ref.Back[last], Back: ref.Back[:last:last]}
	if ref.Page > 0 {
		p.Page = ref.Page - 1
	}
	return p, true
}

// pager is the model of a list's page links.
type pager struct {
	Page     int // 0 when unknown
	FirstURL string
	PrevURL  string
	NextURL  string
}

// keysetPager builds the links of a keyset page: self is the list's path
// relative to the page, filters its query without page parameters, next
// the driver's cursor of the following page ("" on the last).
func keysetPager(self string, filters url.Values, ref pageRef, next string) pager {
	link := func(r pageRef) string { return self + encodeQuery(r.set(cloneValues(filters))) }
	p := pager{Page: ref.Page}
	if ref.After != "" {
		p.FirstURL = link(pageRef{Page: 1})
	}
	if pr, ok := ref.prev(); ok {
		p.PrevURL = link(pr)
	}
	if next != "" {
		p.NextURL = link(ref.next(next))
	}
	return p
}

// numberPager builds the links of a page-numbered list (cookbook mode).
func numberPager(self string, filters url.Values, page int, more bool) pager {
	link := func(n int) string { return self + encodeQuery(pageRef{Page: n}.set(cloneValues(filters))) }
	p := pager{Page: page}
	if page > 1 {
		p.FirstURL = link(1)
		p.PrevURL = link(page - 1)
	}
	if more {
		p.NextURL = link(page + 1)
	}
	return p
}

func cloneValues(v url.Values) url.Values {
	c := make(url.Values, len(v)+3)
	for k, vs := range v {
		c[k] = slices.Clone(vs)
	}
	return c
}
