package ilist

import (
	"slices"
	"testing"
)

type item struct {
	node Node[item]
	v    int
}

func values(l *List[item]) []int {
	var out []int
	for it := l.Front(); it != nil; it = it.node.Next() {
		out = append(out, it.v)
	}
	return out
}

func TestOrder(t *testing.T) {
	var l List[item]
	if !l.Empty() || l.Len() != 0 || l.Front() != nil || l.PopFront() != nil {
		t.Fatal("zero list is not empty")
	}
	its := make([]item, 5)
	for i := range its {
		its[i].v = i
	}
	l.PushBack(&its[1].node, &its[1])
	l.PushBack(&its[3].node, &its[3])
	l.PushFront(&its[0].node, &its[0])
	l.InsertAfter(&its[1].node, &its[2].node, &its[2])
	l.InsertAfter(&its[3].node, &its[4].node, &its[4])
	if got := values(&l); !slices.Equal(got, []int{0, 1, 2, 3, 4}) || l.Len() != 5 {
		t.Fatalf("list = %v (len %d), want [0 1 2 3 4]", got, l.Len())
	}
	for i := range its {
		if its[i].node.List() != &l {
			t.Fatalf("item %d: List() = %p, want %p", i, its[i].node.List(), &l)
		}
	}
	its[2].node.Unlink()
	l.Remove(&its[4].node)
	its[2].node.Unlink() // on no list: nothing
	if got := values(&l); !slices.Equal(got, []int{0, 1, 3}) || l.Len() != 3 {
		t.Fatalf("after removals = %v (len %d), want [0 1 3]", got, l.Len())
	}
	if its[2].node.List() != nil || its[4].node.List() != nil {
		t.Fatal("removed node still names a list")
	}
	var m List[item]
	m.PushBack(&its[4].node, &its[4]) // a removed node can be linked again
	for _, want := range []int{0, 1, 3} {
		if it := l.PopFront(); it == nil || it.v != want || it.node.List() != nil {
			t.Fatalf("PopFront = %v, want %d", it, want)
		}
	}
	if !l.Empty() || l.Len() != 0 || l.Front() != nil {
		t.Fatal("list not empty after popping everything")
	}
	if m.Front() != &its[4] || m.Len() != 1 {
		t.Fatal("second list lost its element")
	}
}

func TestNoAllocs(t *testing.T) {
	var l List[item]
	it := &item{}
	if n := testing.AllocsPerRun(100, func() {
		l.PushBack(&it.node, it)
		l.PopFront()
	}); n != 0 {
		t.Fatalf("push/pop allocates %v times", n)
	}
}
