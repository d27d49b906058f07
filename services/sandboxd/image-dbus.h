/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The image store on the bus (issue 24): org.sandboxd.sandbox1.Images on /org/sandboxd/sandbox1, and its jobs. */
#pragma once

#include <stdbool.h>

typedef struct Manager Manager;
typedef struct ImageJob ImageJob;

#define SANDBOXD_IMAGES_INTERFACE "org.sandboxd.sandbox1.Images"
#define SANDBOXD_ERROR_NO_SUCH_IMAGE "org.sandboxd.sandbox1.NoSuchImage"
#define SANDBOXD_ERROR_IMAGE_EXISTS "org.sandboxd.sandbox1.ImageExists"
#define SANDBOXD_ERROR_IMAGE_IN_USE "org.sandboxd.sandbox1.ImageInUse"
#define SANDBOXD_ERROR_NO_SUCH_JOB "org.sandboxd.sandbox1.NoSuchJob"

/* At start-up, after the state directory is there: <state>/images/, cleared of what an earlier run left
 * half made, and the Images interface on the bus. */
int image_bus_setup(Manager *m);

/* At exit: every running job's helper is killed (its directory goes at the next start). */
void image_jobs_free(Manager *m);

/* The store's directory, <state>/images. */
const char *manager_images_dir(Manager *m);

/* Whether a sandbox (also a pooled one, or one being made) runs on the image, or a job makes it. */
bool image_in_use(Manager *m, const char *name);
