package bench

func Plot(dir string, reports []Report) ([]string, error) { return nil, nil }
