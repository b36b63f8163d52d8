// Package ilist is the intrusive doubly-linked list shared by wq (pool
// worklists, pwq inactive lists, a worker's scheduled list) and kthread (a
// worker's work and delayed lists): the kernel's struct list_head, with
// the links embedded in the element so that linking never allocates.
//
// An element of type T embeds a Node[T]; a List[T] links the nodes. The
// zero List is empty and the zero Node is on no list. Nothing here locks:
// the owner of the list guards it and the nodes on it (the pool lock, the
// kthread worker's mu).
package ilist

// Node is the link an element embeds (struct list_head in the element).
// It knows the list it is on, so that "is it pending?" is one load and
// removal needs no list argument. A Node must not be copied while on a
// list.
type Node[T any] struct {
	next, prev *Node[T]
	list       *List[T]
	elem       *T // the element that embeds the node; set when linked
}

// List is a list of elements of type T, in insertion order.
type List[T any] struct {
	head, tail *Node[T]
	n          int
}

// Empty reports whether l holds no element (list_empty).
func (l *List[T]) Empty() bool { return l.head == nil }

// Len returns the number of elements on l. O(1).
func (l *List[T]) Len() int { return l.n }

// Front returns the first element, or nil when l is empty.
func (l *List[T]) Front() *T {
	if l.head == nil {
		return nil
	}
	return l.head.elem
}

// PushBack links e, whose node is n, at the tail (list_add_tail). n must
// be on no list.
func (l *List[T]) PushBack(n *Node[T], e *T) { l.link(n, l.tail, nil, e) }

// PushFront links e, whose node is n, at the head (list_add). n must be
// on no list.
func (l *List[T]) PushFront(n *Node[T], e *T) { l.link(n, nil, l.head, e) }

// InsertAfter links e, whose node is n, right after pos, which must be on
// l; n must be on no list.
func (l *List[T]) InsertAfter(pos, n *Node[T], e *T) { l.link(n, pos, pos.next, e) }

// link puts n between prev and next, adjacent nodes of l (nil for the
// ends): the kernel's __list_add.
func (l *List[T]) link(n, prev, next *Node[T], e *T) {
	n.list, n.elem = l, e
	n.prev, n.next = prev, next
	if prev != nil {
		prev.next = n
	} else {
		l.head = n
	}
	if next != nil {
		next.prev = n
	} else {
		l.tail = n
	}
	l.n++
}

// PopFront unlinks and returns the first element, or nil when l is empty.
func (l *List[T]) PopFront() *T {
	n := l.head
	if n == nil {
		return nil
	}
	l.Remove(n)
	return n.elem
}

// Remove unlinks n, which must be on l (list_del_init).
func (l *List[T]) Remove(n *Node[T]) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		l.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		l.tail = n.prev
	}
	n.next, n.prev = nil, nil
	n.list = nil
	l.n--
}

// List returns the list n is on, nil when none.
func (n *Node[T]) List() *List[T] { return n.list }

// Unlink removes n from the list it is on; it does nothing when n is on
// no list.
func (n *Node[T]) Unlink() {
	if n.list != nil {
		n.list.Remove(n)
	}
}

// Next returns the element after n on its list, nil at the tail.
func (n *Node[T]) Next() *T {
	if n.next == nil {
		return nil
	}
	return n.next.elem
}
