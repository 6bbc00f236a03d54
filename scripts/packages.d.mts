export declare const PACKAGES: readonly ['shared', 'coordinator', 'consumer-guard', 'chaos', 'cli'];
export type PackageDir = (typeof PACKAGES)[number];
export declare function removeBuilds(root: string): void;
export declare function packArgs(folder: string): string[];
export declare function tarballPath(root: string, folder: string, pkg: PackageDir): string;
