// Command sqliteonly is a program that uses only the SQLite queue. The
// sqlqueue tests list its dependencies to check that it links neither pgx
// nor the MySQL driver.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

func main() {
	q, err := queue.Open(context.Background(), "sqlite://"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(q != nil)
}
