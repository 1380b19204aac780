package scale

import "github.com/vmipam/vmipam/controller/index"

func carriedNames(annotation string) []string { return index.CarriedNames(annotation) }
