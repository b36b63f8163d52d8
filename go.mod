module github.com/gowq/wq

go 1.26.0

require (
	github.com/petermattis/goid v0.0.0-20261109124353-7cfa343ad0ab
	github.com/prometheus/procfs v0.23.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)

require github.com/stretchr/testify v1.12.1 // indirect
